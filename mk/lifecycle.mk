# Graph life-cycle benchmark (issue 39): community refresh time and peak RSS on one large group and on many
# groups, zero summary work on an unchanged graph, recall p99 beside a refresh. QUICK=1 runs a small version;
# ONE_GROUP_FACTS / MANY_FACTS / MANY_GROUPS pick other sizes.
.PHONY: bench-lifecycle
BENCHES += bench-lifecycle

bench-lifecycle:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) bench/bench_lifecycle.py
