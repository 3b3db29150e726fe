# Memory API bench (issue 7): /search p50/p99 over HTTP and NATS at 100k facts, against engine.recall in process.
# QUICK=1 make bench-api runs a small version.
.PHONY: bench-api
BENCHES += bench-api

bench-api:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_api.py
