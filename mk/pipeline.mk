# Pipeline bench (issue 5): enrichment overhead vs a bare relay, sustained load, soak RSS.
.PHONY: bench-pipeline
BENCHES += bench-pipeline

bench-pipeline: $(STAMP)
	$(BIN)/python bench/bench_pipeline.py
