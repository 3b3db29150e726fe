"""Neo4j 5.26+ backend of the graph store contract (production, shared by many processes).

Layout in the graph: ``(:Episode)``, ``(:Entity)``, ``(:Alias)-[:ALIAS_OF]->(:Entity)``,
``(:Episode)-[:MENTIONS]->(:Entity)`` and one ``(:Entity)-[:FACT]->(:Entity)``
relationship per fact version. Every node and fact carries ``group_id`` (the
isolation boundary, in every query's WHERE) and ``gk``, a digits-only token of the
group id that full-text queries must match, so a Lucene search never leaves its
group even though Community Edition has one database.

Why the choices:
- Only parameters reach the server; user text that goes into a Lucene query is
  escaped term by term. No Cypher is built from data.
- Vectors are plain float lists: Bolt 6 vector types do not exist on 5.26.
- Vector searches, graph walks and the rows of a recall's chosen facts and episodes are
  answered from an in-process mirror of the group (float32 matrices, every fact field,
  entity names, episodes; see mirror.py), kept current through a per-group version
  that every write increments (retrieval counts and renames included) and every vector
  search reads in the statement of its round's other reads. Why: one HNSW query cost
  20-40 ms at 100k facts, and the walk and the rows a round trip each, against ~1 ms
  here: a recall of a mirrored group is one round trip. A group not mirrored (loading, or
  larger than `vector_cache_mb`) is answered by the server: an exact in-group scan when
  small, else the HNSW index, over-fetched in proportion to the group's share of it.
- Embeddings are stored twice: the float list the vector indexes read, and `emb32`, the
  same floats as float32 bytes, which a mirror decodes as one buffer (see as_float32_bytes).
- Every candidate query is bounded by an index: Lucene with a limit, HNSW with a
  bounded k, graph hops from id-indexed entities with a per-hop LIMIT. Results never
  carry the 3 KiB embeddings, and times travel as epoch microseconds (decoding
  driver DateTime objects cost more than the queries).
- Reads are single auto-commit queries (one round trip; a managed transaction needs
  two), retried here on transient errors since reads are idempotent. The reads of a
  recall that are issued side by side share round trips: those queued in one event-loop
  turn go as one statement of `CALL {}` parts (HNSW queries each in a statement of their
  own, sent alongside, so the server works on them in parallel). See `CoalescedReads._shared_read` (coalesce.py).
- Retrieval counts are kept in memory and written in one statement at most a second
  later (and at close), so recall never waits on a write; reads here add what is held.
- An episode's writes go through one explicit transaction that the engine drives;
  they are queued and sent as one UNWIND statement at commit, or earlier when a read
  in the same transaction could see them (see write_txn.py). A batch of episodes
  (`run_transactions`) shares one transaction and one commit, each episode still
  atomic on its own. Nothing is acknowledged before it is stored.
- Rows come back collected into one record wherever a read may return many: the
  driver's per-record cost exceeded the server's work for 30 fact rows.
- Neo4j older than 5.18 is refused at open: relationship vector indexes and
  ``vector.similarity.cosine`` arrived in 5.18.
"""

from mnemobus.store.neo4j.store import Neo4jStore

__all__ = ["Neo4jStore"]
