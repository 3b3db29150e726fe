# Local Neo4j 5.26 Community for development and CI (issue 4).
# `neo4j-jars` fetches the server jars once (~1 min cold, instant when present);
# the pytest session fixture (tests/store/conftest.py) starts the server on a
# free loopback port, waits for Bolt and stops it at the end of the run.
# Set NEO4J_URI to test against a server you run yourself instead.

# keep whatever default goal the including Makefile has (restored at the end)
_NEO4J_MK_GOAL := $(.DEFAULT_GOAL)

NEO4J_VERSION  ?= 5.26.30
NEO4J_DIR      := deploy/neo4j
NEO4J_LIB      := $(NEO4J_DIR)/target/lib
NEO4J_STAMP    := $(NEO4J_LIB)/neo4j-$(NEO4J_VERSION).jar
MVN            ?= mvn
NEO4J_PYTHON   ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)

TEST_PREREQS += neo4j-jars

.PHONY: neo4j-jars neo4j-run neo4j-check neo4j-clean bench-neo4j
BENCHES += bench-neo4j

neo4j-jars: $(NEO4J_STAMP)

$(NEO4J_STAMP): $(NEO4J_DIR)/pom.xml
	$(MVN) -q -B -f $(NEO4J_DIR)/pom.xml \
	  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies
	@test -f $@ || { echo "neo4j-jars: $@ missing after the Maven run" >&2; exit 1; }
	@touch $@

## run a local Neo4j in the foreground (prints NEO4J_URI=...; Ctrl-C stops it)
neo4j-run: neo4j-jars
	$(NEO4J_PYTHON) -m mnemobus.kernel.neo4j_local --print-uri

## start, report start time and RSS, stop
neo4j-check: neo4j-jars
	$(NEO4J_PYTHON) -m mnemobus.kernel.neo4j_local --check

neo4j-clean:
	rm -rf $(NEO4J_DIR)/target

## the store bench on both backends, side by side: 100k facts (the issue's size, ~5 min) measured after a minute
## of warm-up recalls, QUICK=1 2k facts after 5 s, or BENCH_FACTS=<n> any size (e.g. 10000)
bench-neo4j: neo4j-jars
	$(NEO4J_PYTHON) bench/bench_neo4j.py --facts $(or $(BENCH_FACTS),$(if $(filter-out 0,$(QUICK)),2000,100000)) \
	  --warmup-s $(if $(filter-out 0,$(QUICK)),5,60)

.DEFAULT_GOAL := $(_NEO4J_MK_GOAL)
