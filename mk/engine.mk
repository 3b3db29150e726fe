# Memory engine benchmark (issue 3): ingestion episodes/s, recall p50/p99 at 10k/100k/1M facts, vs plain FTS5.
# QUICK=1 make bench-engine runs a small version.
.PHONY: bench-engine
BENCHES += bench-engine

bench-engine:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_engine.py

# The IVF index's share of the exact top 10 on real English past ann_min_rows, and a search's cost (2026-11-29)
.PHONY: bench-vector-index
BENCHES += bench-vector-index

bench-vector-index:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_vector_index.py
