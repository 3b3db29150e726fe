# Issue 23: extraction quality on the labelled set (bench/extraction_set) and extractor speed.
#   make bench-extraction   precision/recall of facts and endings per extractor, held-out and dev parts; episodes/s
.PHONY: bench-extraction
BENCHES += bench-extraction

bench-extraction: $(STAMP)
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_extraction.py

# Issue 35: the blind set through the LLM extractor on the local model server (the only model here), aggregate only.
#   make bench-extraction-llm   facts and endings of SmolLM2-135M through POST /messages, no offline fallback
.PHONY: bench-extraction-llm
BENCHES += bench-extraction-llm

bench-extraction-llm: $(STAMP) llama-server
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_extraction_llm.py
