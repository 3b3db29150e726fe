# Issue 38: the root package split (mnemobus/shared, mnemobus/kernel) as a re-runnable script. After merging a
# branch written against the old layout, `make restructure` moves and rewrites what it still has at the old place;
# `make restructure-check` lists it without changing anything (tests/architecture/test_restructure.py runs it).
.PHONY: restructure restructure-check

restructure:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) tools/restructure.py

restructure-check:
	$(if $(wildcard .venv/bin/python),.venv/bin/python,python3) tools/restructure.py --check
