"""The Neo4j store's limits and timings: one place to read and tune them (figures behind them: docs/neo4j.md)."""

from __future__ import annotations

MIN_VERSION = (5, 18)
EMBEDDING_DIM = 384
ANN_OVERSAMPLE = 3  # neighbours asked per result wanted, after scaling by the group's share of the index
ANN_MAX = 10_000  # a group needing more neighbours than this from the shared index is scanned exactly
EXACT_SCAN_MAX = 600  # exact scan or HNSW, by cost: HNSW costs this many scanned rows + 2 per neighbour
SHARE_TTL_S = 60.0
MIRROR_FRESH_S = 0.2  # a walk and get_facts/get_episodes trust a group version confirmed this recently
MIRROR_TOO_BIG_S = 300.0  # a group over the mirror budget is not tried again for this long
LOAD_PAGE = 2000  # rows per page (one record) when a mirror loads
LOAD_FETCH = 200  # rows per Bolt fetch of rows without a version: larger fetches held the event loop
OWN_WRITE_WAIT_S = 0.05  # a read that saw this process's count write committed waits this long for its answer
MIRROR_WAIT_S = 0.05  # a search waits this long for a group's first load (a small group's), then asks the server
LOAD_TIMEOUT_S = 600.0  # one kind's rows without a version read into a mirror
LOAD_PAGE_TIMEOUT_S = 60.0  # one page of them
COUNT_ANSWER_WAIT_S = 2.0  # a fact read waits at most this long for this process's count write on its way
COUNTED_READS = 3  # a fact read spanning this process's count write is made again at most this often (retrievals.py)
RETRIEVAL_FLUSH_S = 1.0  # retrieval counts are written at most this long after they happen
RETRIEVAL_BACKLOG = 1000  # ... or as soon as this many facts wait
RETRIEVAL_WRITE_TIMEOUT_S = 30.0  # the server gives up on a count write (waiting on a group's writers) after this
DELETE_BATCH = 10_000  # rows of one kind per transaction when a group is deleted
LOCK_RETRIES = 3  # a batch that lost a deadlock runs again this many times before its works are told to retry
WRITE_TIMEOUT_S = 120.0  # the server ends a write transaction (a wait for a lock included) after this: never a hang

ERASURE_LEASE_S = 45.0  # a journalled erasure stays its owner's this long after each batch (erasure.py)
