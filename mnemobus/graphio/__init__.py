"""Seeing the memory and bringing memory in: exports (jsonl, GraphML, Mermaid, an HTML page) and imports.

One module a job: `rows` (one stored row as a JSON object and back), `export` (a group in each format),
`layout` and `page` (the self-contained HTML page), `messages` (a chat log in through the worker's
ingestion), `restore` (a jsonl export back into a store), `progress` and `checkpoint` (what every long run
shows and how it resumes).
"""
