# Issue 26: every role as its own process on a 3-node NATS cluster (JetStream R3) and the local Neo4j.
#   make cluster-run     start it all, play the demo through it, keep serving until Ctrl-C
.PHONY: cluster-run

cluster-run: $(STAMP) neo4j-jars
	$(BIN)/mnemobus cluster
