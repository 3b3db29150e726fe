# Issue 37: graph recall (memory.recall.graph) measured through POST /search on the LoCoMo dev conversations, each
# mode against graph: off and FTS5 + turns-around, tuned on one conversation and reported on the other; and what it
# costs a recall (BENCH_SIZES=10k,100k; default 10k). QUICK=1 runs small versions.
.PHONY: bench-graph-recall bench-graph-latency
BENCHES += bench-graph-recall bench-graph-latency

bench-graph-recall:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_graph_recall.py

bench-graph-latency:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_graph_latency.py
