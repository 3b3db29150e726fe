# Issue 34: the HTTP API under schemathesis-generated requests for FUZZ_SECONDS (default 300): 0 answers 5xx, and
# 0 dead letters of what it accepted once the worker has settled it.
# QUICK=1 make bench-http-fuzz runs for 30 s. `make test` runs the short version (tests/blackbox/test_http_fuzz.py).
.PHONY: bench-http-fuzz
BENCHES += bench-http-fuzz

bench-http-fuzz:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_http_fuzz.py
