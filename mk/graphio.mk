# Seeing the memory and bringing it in (issue 40). QUICK=1 make bench-import runs a small version.
# Debian's chromium for the graph page's browser tests (tests/api/test_graph_page.py fails, never skips, without
# it) and the import/page bench.

_GRAPHIO_MK_GOAL := $(.DEFAULT_GOAL)

TEST_PREREQS += chromium
# graphiti-core 0.31.1 in its own venv (mk/quality.mk): tests/store/test_import_graphiti.py builds a real Graphiti
# graph with it to import
TEST_PREREQS += bench/.venv-graphiti/.installed-stamp
BENCHES += bench-import

.PHONY: chromium bench-import

chromium:
	@sh deploy/chromium/install-chromium.sh

# import messages/s on SQLite (offline extractor) and the graph page's weight and load time at 5,000 entities
bench-import: $(STAMP) chromium
	$(BIN)/python bench/bench_import.py

.DEFAULT_GOAL := $(_GRAPHIO_MK_GOAL)
