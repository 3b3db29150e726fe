# Issue 23: extraction quality on the labelled set (bench/extraction_set) and extractor speed.
#   make bench-extraction   precision/recall of facts and endings per extractor, held-out and dev parts; episodes/s
.PHONY: bench-extraction
BENCHES += bench-extraction

bench-extraction: $(STAMP)
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_extraction.py
