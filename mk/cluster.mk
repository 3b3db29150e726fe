# Issue 26: every role as its own process on a 3-node NATS cluster (JetStream R3) and the local Neo4j.
#   make cluster-run     start it all, play the demo through it, keep serving until Ctrl-C
.PHONY: cluster-run

cluster-run: $(STAMP) neo4j-jars
	$(BIN)/mnemobus cluster

# Issue 26: ingestion on Neo4j against SQLite, in process and with 1 and 2 worker processes (QUICK=1: small).
.PHONY: bench-ingest
BENCHES += bench-ingest

bench-ingest: $(STAMP) neo4j-jars
	$(BIN)/python bench/bench_ingest.py
