"""The Neo4j store's limits and timings: one place to read and tune them (figures behind them: docs/neo4j.md)."""

from __future__ import annotations



MIN_VERSION = (5, 18)
EMBEDDING_DIM = 384
ANN_OVERSAMPLE = 3  # neighbours asked per result wanted, after scaling by the group's share of the index
ANN_MAX = 10_000  # a group needing more neighbours than this from the shared index is scanned exactly
# Exact scan or HNSW, by cost. Measured on 5.26 (2 cores): an exact scan costs ~30 us a row (each
# 384-float embedding is a chain of property blocks); an HNSW query ~20-40 ms at k=90 (one search per
# Lucene segment, and vector indexes merge segments only 50 at a time) plus ~60 us per neighbour asked.
# In units of one scanned row: exact = rows of the group, HNSW = EXACT_SCAN_MAX + 2 * neighbours.
EXACT_SCAN_MAX = 600
SHARE_TTL_S = 60.0
MIRROR_FRESH_S = 0.2  # a walk and get_facts/get_episodes trust a group version confirmed this recently (a recall's
# candidate round confirmed it ~10 ms before)
MIRROR_TOO_BIG_S = 300.0  # a group over the mirror budget is not tried again for this long
LOAD_PAGE = 2000  # rows per page (one record) when a mirror loads: ~4 MB of facts; 5000 was barely faster
LOAD_FETCH = 200  # rows per Bolt fetch of rows without a version: decoding 1000 embeddings as float lists held the
# event loop ~170 ms
OWN_WRITE_WAIT_S = 0.05  # a read that saw this process's count write committed waits this long for its answer
MIRROR_WAIT_S = 0.05  # a search waits this long for a group's first load (a small group's), then asks the server
LOAD_TIMEOUT_S = 600.0  # one kind's rows without a version read into a mirror (100k facts: ~20 s on 2 busy cores)
LOAD_PAGE_TIMEOUT_S = 60.0  # one page (~0.15 s on 2 busy cores)
RETRIEVAL_FLUSH_S = 1.0  # retrieval counts are written at most this long after they happen
RETRIEVAL_BACKLOG = 1000  # ... or as soon as this many facts wait
RETRIEVAL_WRITE_TIMEOUT_S = 30.0  # the server gives up on a count write (waiting on a group's writers) after this
DELETE_BATCH = 10_000  # rows of one kind per transaction when a group is deleted
LOCK_RETRIES = 3  # a batch that lost a deadlock runs again this many times before its works are told to retry

