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
  entity names, episodes; see neo4j_mirror), kept current through a per-group version
  that every write increments (retrieval counts and renames included) and every vector
  search reads in the statement of its round's other reads. Why: one HNSW query cost
  20-40 ms at 100k facts, and the walk and the rows a round trip each, against ~1 ms
  here: a recall of a mirrored group is one round trip. A group not mirrored (loading, or
  larger than `vector_cache_mb`) is answered by the server: an exact in-group scan when
  small, else the HNSW index, over-fetched in proportion to the group's share of it.
- Embeddings are stored twice: the float list the vector indexes read, and `emb32`, the
  same floats as float32 bytes, which a mirror decodes as one buffer (see _vec_bytes).
- Every candidate query is bounded by an index: Lucene with a limit, HNSW with a
  bounded k, graph hops from id-indexed entities with a per-hop LIMIT. Results never
  carry the 3 KiB embeddings, and times travel as epoch microseconds (decoding
  driver DateTime objects cost more than the queries).
- Reads are single auto-commit queries (one round trip; a managed transaction needs
  two), retried here on transient errors since reads are idempotent. The reads of a
  recall that are issued side by side share round trips: those queued in one event-loop
  turn go as one statement of `CALL {}` parts (HNSW queries each in a statement of their
  own, sent alongside, so the server works on them in parallel). See `_qc`.
- Retrieval counts are kept in memory and written in one statement at most a second
  later (and at close), so recall never waits on a write; reads here add what is held.
- An episode's writes go through one explicit transaction that the engine drives;
  they are queued and sent as one UNWIND statement at commit, or earlier when a read
  in the same transaction could see them (see _Neo4jWriteTxn). A batch of episodes
  (`run_transactions`) shares one transaction and one commit, each episode still
  atomic on its own. Nothing is acknowledged before it is stored.
- Rows come back collected into one record wherever a read may return many: the
  driver's per-record cost exceeded the server's work for 30 fact rows.
- Neo4j older than 5.18 is refused at open: relationship vector indexes and
  ``vector.similarity.cosine`` arrived in 5.18.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import numpy as np
from neo4j import (READ_ACCESS, WRITE_ACCESS, AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction,
                   AsyncResult, AsyncTransaction, NotificationMinimumSeverity, Query, unit_of_work)
from neo4j import exceptions as nx

from mnemobus.errors import StoreIntegrityError, StoreUnavailable, episode_id_taken
from mnemobus.groups import GroupId
from mnemobus.store.contract import DeleteCounts, Hit, Prefetch, Step, Vector, pick_by_type
from mnemobus.store.model import EdgeType, Entity, Episode, Fact, GroupExport
from mnemobus.store.neo4j_overlay import _EPOCH, Overlay, Pending, as_datetime
from mnemobus.store.neo4j_mirror import (DELTA, KINDS, LOAD_COLUMNS, PAGE, SIZES, UNSTAMPED, GroupMirror,
                                        MirrorCache)

log = logging.getLogger(__name__)

MIN_VERSION = (5, 18)
EMBEDDING_DIM = 384
ANN_OVERSAMPLE = 3  # neighbours asked per result wanted, after scaling by the group's share of the index
ANN_MAX = 10_000  # a group needing more neighbours than this from the shared index is scanned exactly
# Exact scan or HNSW, by cost. Measured on 5.26 (2 cores): an exact scan costs ~30 us a row (each
# 384-float embedding is a chain of property blocks); an HNSW query ~20-40 ms at k=90 (one search per
# Lucene segment, and vector indexes merge segments only 50 at a time) plus ~60 us per neighbour asked.
# In units of one scanned row: exact = rows of the group, HNSW = EXACT_SCAN_MAX + 2 * neighbours.
EXACT_SCAN_MAX = 600
SHARE_TTL_S = 60.0
MIRROR_FRESH_S = 0.2  # a walk and get_facts/get_episodes trust a group version confirmed this recently (a recall's
# candidate round confirmed it ~10 ms before)
MIRROR_TOO_BIG_S = 300.0  # a group over the mirror budget is not tried again for this long
LOAD_PAGE = 2000  # rows per page (one record) when a mirror loads: ~4 MB of facts; 5000 was barely faster
LOAD_FETCH = 200  # rows per Bolt fetch of rows without a version: decoding 1000 embeddings as float lists held the
# event loop ~170 ms
OWN_WRITE_WAIT_S = 0.05  # a read that saw this process's count write committed waits this long for its answer
MIRROR_WAIT_S = 0.05  # a search waits this long for a group's first load (a small group's), then asks the server
LOAD_TIMEOUT_S = 600.0  # one kind's rows without a version read into a mirror (100k facts: ~20 s on 2 busy cores)
LOAD_PAGE_TIMEOUT_S = 60.0  # one page (~0.15 s on 2 busy cores)
RETRIEVAL_FLUSH_S = 1.0  # retrieval counts are written at most this long after they happen
RETRIEVAL_BACKLOG = 1000  # ... or as soon as this many facts wait
RETRIEVAL_WRITE_TIMEOUT_S = 30.0  # the server gives up on a count write (waiting on a group's writers) after this
DELETE_BATCH = 10_000  # rows of one kind per transaction when a group is deleted
LOCK_RETRIES = 3  # a batch that lost a deadlock runs again this many times before its works are told to retry

T = TypeVar("T")

SCHEMA: tuple[str, ...] = (
    "CREATE CONSTRAINT mb_episode_id IF NOT EXISTS FOR (n:Episode) REQUIRE n.id IS UNIQUE",
    "CREATE CONSTRAINT mb_entity_id IF NOT EXISTS FOR (n:Entity) REQUIRE n.id IS UNIQUE",
    "CREATE CONSTRAINT mb_fact_id IF NOT EXISTS FOR ()-[r:FACT]-() REQUIRE r.id IS UNIQUE",
    # one entity per alias and type (before issue 23: per alias; _ensure_schema moves a store over)
    "CREATE CONSTRAINT mb_alias_typed_key IF NOT EXISTS FOR (n:Alias) REQUIRE (n.group_id, n.key, n.type) IS UNIQUE",
    "CREATE INDEX mb_episode_group IF NOT EXISTS FOR (n:Episode) ON (n.group_id, n.reference_time)",
    "CREATE INDEX mb_entity_group IF NOT EXISTS FOR (n:Entity) ON (n.group_id)",
    "CREATE INDEX mb_fact_group IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.group_id)",
    "CREATE INDEX mb_fact_subject IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.subject_id)",
    # a fact chain (subject and relation): the speaker of a busy group is the subject of thousands of facts
    "CREATE INDEX mb_fact_chain IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.subject_id, r.relation)",
    # the in-process mirrors (neo4j_mirror): one version node per group, and rows stamped with the version
    # that last wrote them, so a mirror reads only what changed since it last looked
    "CREATE CONSTRAINT mb_group_version IF NOT EXISTS FOR (n:GroupVersion) REQUIRE n.group_id IS UNIQUE",
    "CREATE INDEX mb_fact_ver IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.group_id, r.ver)",
    "CREATE INDEX mb_entity_ver IF NOT EXISTS FOR (n:Entity) ON (n.group_id, n.ver)",
    "CREATE INDEX mb_episode_ver IF NOT EXISTS FOR (n:Episode) ON (n.group_id, n.ver)",
    "CREATE FULLTEXT INDEX mb_fact_text IF NOT EXISTS FOR ()-[r:FACT]-() "
    "ON EACH [r.fact, r.subject_name, r.relation_text, r.object_name, r.gk] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    "CREATE FULLTEXT INDEX mb_entity_text IF NOT EXISTS FOR (n:Entity) "
    "ON EACH [n.name, n.canonical_name, n.alias_text, n.gk] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    "CREATE FULLTEXT INDEX mb_episode_text IF NOT EXISTS FOR (n:Episode) "
    "ON EACH [n.content, n.response, n.gk] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    "CREATE VECTOR INDEX mb_fact_vec IF NOT EXISTS FOR ()-[r:FACT]-() ON (r.embedding) "
    "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}",
    "CREATE VECTOR INDEX mb_entity_vec IF NOT EXISTS FOR (n:Entity) ON (n.embedding) "
    "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}",
    "CREATE VECTOR INDEX mb_episode_vec IF NOT EXISTS FOR (n:Episode) ON (n.embedding) "
    "OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}}",
)
SCHEMA_NAMES = frozenset(re.search(r"(?:CONSTRAINT|INDEX) (\w+)", q).group(1) for q in SCHEMA)  # type: ignore[union-attr]

_RETRYABLE = (nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError)
_TRANSIENT = (nx.ServiceUnavailable, nx.SessionExpired, nx.TransientError, nx.DriverError, OSError)
_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')
_LUCENE_WORDS = frozenset({"AND", "OR", "NOT", "TO"})


def group_key(group_id: str) -> str:
    """Digits-only token of the group id: one Lucene term that no analyzer splits or stems."""
    return str(int.from_bytes(hashlib.sha256(group_id.encode()).digest()[:8], "big"))


def lucene_terms(terms: Sequence[str]) -> str:
    """Terms as an OR of escaped Lucene terms; user text can never become query syntax."""
    out = []
    for t in terms:
        t = t.strip()
        if not t:
            continue
        if t.upper() in _LUCENE_WORDS:
            t = t.lower()
        out.append(_LUCENE_SPECIAL.sub(r"\\\1", t))
    return " OR ".join(out)


def _vec(v: Vector | Sequence[float] | None) -> list[float] | None:
    if v is None:
        return None
    return np.asarray(v, dtype=np.float32).astype(float).tolist()


def _vec_bytes(v: Vector | Sequence[float] | None) -> bytes | None:
    """The embedding as little-endian float32 bytes: the `emb32` copy beside the float list the vector index
    reads, so a mirror loads a row's embedding as one buffer (see neo4j_mirror.as_vector)."""
    if v is None:
        return None
    return np.asarray(v, dtype="<f4").tobytes()


_dt = as_datetime


def _utc(v: datetime | None) -> datetime | None:
    """Datetimes go to Neo4j as zoned DateTime; naive ones are taken as UTC (the contract's convention)."""
    if v is None:
        return None
    return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)


def _us(v: datetime) -> int:
    """Microseconds since the epoch: how the mirrors hold times (as the server's projections return them)."""
    return (_utc(v) - _EPOCH) // timedelta(microseconds=1)  # type: ignore[operator]


def _cos(score: float) -> float:
    """Neo4j reports cosine rescaled to (1+cos)/2; the contract speaks plain cosine."""
    return 2.0 * float(score) - 1.0


def _episode(n: dict[str, Any]) -> Episode:
    return Episode(
        id=n["id"],
        group_id=GroupId(n["group_id"]),
        content=n["content"],
        role=n["role"],
        source_message_id=n["source_message_id"],
        reference_time=_dt(n["reference_time"]),  # type: ignore[arg-type]
        response=n.get("response"),
        agent_id=n.get("agent_id"),
        platform=n.get("platform"),
        channel_id=n.get("channel_id"),
        created_at=_dt(n.get("created_at")),
        speaker=n.get("speaker"),
        name=n.get("name"),
    )


def _entity(n: dict[str, Any]) -> Entity:
    return Entity(
        id=n["id"],
        group_id=GroupId(n["group_id"]),
        name=n["name"],
        canonical_name=n["canonical_name"],
        type=n.get("type") or "thing",
        aliases=tuple(sorted(n.get("aliases") or ())),
        summary=n.get("summary") or "",
        confidence=float(n.get("confidence", 1.0)),
        first_seen=_dt(n.get("first_seen")),
        last_seen=_dt(n.get("last_seen")),
    )


def _fact(r: dict[str, Any], subject_name: str | None = None, object_name: str | None = None) -> Fact:
    # provenance pairs in episode-id order, as the embedded store lists them
    prov = sorted(zip(r.get("episode_ids") or (), r.get("source_message_ids") or (), strict=False))
    return Fact(
        id=r["id"],
        group_id=GroupId(r["group_id"]),
        subject_id=r["subject_id"],
        object_id=r["object_id"],
        subject_name=subject_name if subject_name is not None else r.get("subject_name", ""),
        object_name=object_name if object_name is not None else r.get("object_name", ""),
        relation=r["relation"],
        edge_type=r["edge_type"],
        fact=r["fact"],
        confidence=float(r["confidence"]),
        valid_at=_dt(r.get("valid_at")),
        invalid_at=_dt(r.get("invalid_at")),
        created_at=_dt(r["created_at"]),  # type: ignore[arg-type]
        expired_at=_dt(r.get("expired_at")),
        superseded_by=r.get("superseded_by"),
        last_seen=_dt(r.get("last_seen")),
        episode_ids=tuple(e for e, _ in prov),
        source_message_ids=tuple(m for _, m in prov),
        retrieval_count=int(r.get("retrieval_count") or 0),
    )


# Cypher fragments (constants, never data)
_VALID = "(r.valid_at IS NULL OR r.valid_at <= $as_of) AND (r.invalid_at IS NULL OR $as_of < r.invalid_at)"
# Explicit projections: `{.*}` would load the 384-float embedding of every row (3 KiB each,
# the bulk of the store) just to drop it, which at 100k facts pushes hot rows out of the page cache.
_FACT_PROPS = (
    "id", "group_id", "subject_id", "object_id", "subject_name", "object_name", "relation", "edge_type", "fact",
    "confidence", "valid_at", "invalid_at", "created_at", "expired_at", "superseded_by", "last_seen",
    "episode_ids", "source_message_ids", "retrieval_count",
)
_ENTITY_PROPS = ("id", "group_id", "name", "canonical_name", "type", "aliases", "summary", "confidence",
                 "first_seen", "last_seen")
_EPISODE_FIELDS = ("id", "group_id", "content", "role", "source_message_id", "reference_time", "response",
                   "agent_id", "platform", "channel_id", "created_at", "screened", "speaker", "name")


_TIME_PROPS = frozenset({"valid_at", "invalid_at", "created_at", "expired_at", "last_seen", "first_seen", "reference_time"})


def _proj(var: str, props: Sequence[str]) -> str:
    """A map projection of named properties (constant Cypher text from constant names).

    Times come back as integer microseconds since the epoch: the driver turns each
    zoned DateTime into Python objects at ~0.1 ms apiece, which made decoding 30 facts
    cost more than finding them.
    """
    parts = [
        f"{p}: {var}.{p}.epochSeconds * 1000000 + {var}.{p}.microsecond" if p in _TIME_PROPS else "." + p
        for p in props
    ]
    return var + " {" + ", ".join(parts) + "}"


_VERSION_Q = "OPTIONAL MATCH (gv:GroupVersion {group_id: $g}) RETURN gv.epoch AS e, coalesce(gv.v, 0) AS v"
# a change mirrors cannot follow row by row (rows deleted): a new epoch makes them reload the group
_NEW_EPOCH = (
    "MERGE (gv:GroupVersion {group_id: $g}) ON CREATE SET gv.v = 0 SET gv.epoch = randomUUID(), gv.v = gv.v + 1"
)
_R = _proj("r", _FACT_PROPS)
_E = _proj("e", _ENTITY_PROPS)
_N_ENTITY = _proj("n", _ENTITY_PROPS)
_N_EPISODE = _proj("n", _EPISODE_FIELDS)
_FACT_RETURN = f"{_R} AS r, s.name AS sn, o.name AS on"


def _episode_params(e: Episode, screened: bool, embedding: Vector | None) -> dict[str, Any]:
    return {
        "id": e.id, "group_id": e.group_id, "gk": group_key(e.group_id), "content": e.content, "role": e.role,
        "source_message_id": e.source_message_id, "reference_time": _utc(e.reference_time),
        "response": e.response, "agent_id": e.agent_id, "platform": e.platform, "channel_id": e.channel_id,
        "created_at": _utc(e.created_at) or datetime.now(UTC), "screened": bool(screened),
        "embedding": _vec(embedding), "emb32": _vec_bytes(embedding), "speaker": e.speaker, "name": e.name,
    }


def _fact_params(f: Fact, embedding: Vector | None) -> dict[str, Any]:
    return {
        "id": f.id, "group_id": f.group_id, "gk": group_key(f.group_id), "subject_id": f.subject_id,
        "object_id": f.object_id, "subject_name": f.subject_name, "object_name": f.object_name,
        "relation": f.relation, "relation_text": f.relation.replace("_", " "), "edge_type": f.edge_type, "fact": f.fact, "confidence": float(f.confidence),
        "valid_at": _utc(f.valid_at), "invalid_at": _utc(f.invalid_at), "created_at": _utc(f.created_at),
        "expired_at": _utc(f.expired_at), "superseded_by": f.superseded_by, "last_seen": _utc(f.last_seen),
        "episode_ids": list(f.episode_ids), "source_message_ids": list(f.source_message_ids),
        "retrieval_count": int(f.retrieval_count), "embedding": _vec(embedding), "emb32": _vec_bytes(embedding),
    }


def _entity_params(e: Entity, embedding: Vector | None) -> dict[str, Any]:
    return {
        "id": e.id, "group_id": e.group_id, "gk": group_key(e.group_id), "name": e.name,
        "canonical_name": e.canonical_name, "type": e.type, "aliases": sorted({e.canonical_name, *e.aliases}),
        "alias_text": " ".join(sorted({e.canonical_name, *e.aliases})), "summary": e.summary, "confidence": float(e.confidence),
        "first_seen": _utc(e.first_seen), "last_seen": _utc(e.last_seen), "embedding": _vec(embedding),
        "emb32": _vec_bytes(embedding),
    }


# The version of each written group goes up by one per statement that writes it, and the rows
# (episodes, entities, facts) carry the new version as `ver`: see neo4j_mirror. The version
# node also serialises a group's writers (its lock is held to commit), so versions follow commit
# order. Groups are locked in sorted order: two transactions never wait on each other in a cycle.
_BUMP = (
    "CALL { UNWIND $groups AS g MERGE (gv:GroupVersion {group_id: g}) "
    "  ON CREATE SET gv.epoch = randomUUID(), gv.v = 0 SET gv.v = gv.v + 1 "
    "  RETURN collect({g: g, v: gv.v, e: gv.epoch}) AS vers } "
)
_VER = "[x IN vers WHERE x.g = {}.group_id | x.v][0]"

# Retrieval counts are fact fields like any other: the write bumps the group's version and stamps the rows,
# so other processes' mirrors read the new counts (see flush_retrievals).
_COUNT_RETRIEVALS = (
    _BUMP
    + "CALL { WITH vers UNWIND $rows AS x MATCH ()-[r:FACT {id: x.id, group_id: x.g}]->() "
    "  SET r.retrieval_count = coalesce(r.retrieval_count, 0) + x.n, r.ver = [v IN vers WHERE v.g = x.g | v.v][0] "
    "  RETURN collect({g: x.g, id: x.id, n: r.retrieval_count}) AS counts } "
    "RETURN vers, counts"
)

# One statement applies every buffered write of a transaction, kinds in dependency order
# (episodes and entities before the observations, links and facts that name them). Each part
# reports what it touched, so a missing endpoint is named instead of silently skipped.
_FLUSH = (
    _BUMP
    + "CALL { WITH vers UNWIND $eps AS p CREATE (n:Episode) SET n = p, n.ver = " + _VER.format("p") + " "
    "  RETURN count(*) AS n_eps } "
    "CALL { WITH vers UNWIND $ents AS p CREATE (e:Entity) SET e = p, e.ver = " + _VER.format("p") + " WITH e, p "
    "  CALL { WITH e, p UNWIND p.aliases AS key "
    "    MERGE (a:Alias {group_id: p.group_id, key: key, type: p.type}) ON CREATE SET a.entity_id = p.id "
    "    FOREACH (_ IN CASE WHEN a.entity_id = p.id THEN [1] ELSE [] END | MERGE (a)-[:ALIAS_OF]->(e)) } "
    "  RETURN count(*) AS n_ents } "
    "CALL { WITH vers UNWIND $obs AS o "
    "  CALL { WITH o, vers MATCH (e:Entity {id: o.id, group_id: o.g}) "
    "    MERGE (a:Alias {group_id: o.g, key: o.alias, type: e.type}) ON CREATE SET a.entity_id = o.id "
    "    SET e.name = o.name, e.ver = [v IN vers WHERE v.g = o.g | v.v][0], "
    "        e.aliases = CASE WHEN a.entity_id = o.id AND NOT o.alias IN coalesce(e.aliases, []) "
    "                         THEN coalesce(e.aliases, []) + o.alias ELSE e.aliases END, "
    "        e.last_seen = CASE WHEN e.last_seen IS NULL OR e.last_seen < o.seen THEN o.seen ELSE e.last_seen END, "
    "        e.first_seen = CASE WHEN e.first_seen IS NULL OR e.first_seen > o.seen THEN o.seen ELSE e.first_seen END "
    "    SET e.alias_text = reduce(t = '', x IN coalesce(e.aliases, []) | t + ' ' + x) "
    "    FOREACH (_ IN CASE WHEN a.entity_id = o.id THEN [1] ELSE [] END | MERGE (a)-[:ALIAS_OF]->(e)) "
    "    RETURN o.id AS hit } "
    "  RETURN collect(hit) AS obs_hit } "
    "CALL { UNWIND $links AS l MATCH (ep:Episode {id: l.ep, group_id: l.g}), (e:Entity {id: l.en, group_id: l.g}) "
    "  MERGE (ep)-[:MENTIONS]->(e) RETURN count(*) AS n_links } "
    "CALL { WITH vers UNWIND $facts AS p "
    "  MATCH (s:Entity {id: p.subject_id, group_id: p.group_id}), (o:Entity {id: p.object_id, group_id: p.group_id}) "
    "  CREATE (s)-[r:FACT]->(o) SET r = p, r.ver = " + _VER.format("p") + " RETURN collect(p.id) AS fact_hit } "
    "CALL { WITH vers UNWIND $upds AS u MATCH ()-[r:FACT {id: u.id, group_id: u.g}]->() "
    "  SET r.ver = [x IN vers WHERE x.g = u.g | x.v][0], "
    "      r.confidence = u.confidence, r.last_seen = u.last_seen, r.valid_at = u.valid_at, "
    "      r.invalid_at = u.invalid_at, r.expired_at = u.expired_at, r.superseded_by = u.superseded_by "
    "  RETURN collect(u.id) AS upd_hit } "
    "CALL { WITH vers UNWIND $srcs AS x "
    "  CALL { WITH x, vers MATCH ()-[r:FACT {id: x.id, group_id: x.g}]->() WHERE NOT x.ep IN coalesce(r.episode_ids, []) "
    "    SET r.episode_ids = coalesce(r.episode_ids, []) + x.ep, r.ver = [v IN vers WHERE v.g = x.g | v.v][0], "
    "        r.source_message_ids = coalesce(r.source_message_ids, []) + x.sm RETURN 1 AS one } "
    "  RETURN count(*) AS n_srcs } "
    "RETURN obs_hit, fact_hit, upd_hit"
)


# Group locks. A write transaction takes its groups' locks before its first read of them and holds them to commit,
# so what it read stays true (see neo4j_overlay) and two writers of one group (two workers) never both act on the
# same fact chain: the second waits for the first to commit, then reads what it wrote. `SET gv.v = gv.v` takes the
# node's write lock without changing the version. A batch locks (and creates) all its groups at once, sorted, so
# batches never wait on each other in a cycle; a read of a group not yet locked locks it only if it exists (a read
# through a transaction must not create nodes: an unknown group has nothing to race on but unique ids).
_LOCK_GROUPS = (
    "UNWIND $groups AS g OPTIONAL MATCH (old:GroupVersion {group_id: g}) WITH g, old IS NULL AS fresh "
    "MERGE (gv:GroupVersion {group_id: g}) ON CREATE SET gv.epoch = randomUUID(), gv.v = 0 "
    "SET gv.v = gv.v RETURN g, gv.epoch AS e, gv.v AS v, fresh"
)
_LOCK_EXISTING = ("UNWIND $groups AS g MATCH (gv:GroupVersion {group_id: g}) SET gv.v = gv.v "
                  "RETURN g, gv.epoch AS e, gv.v AS v, false AS fresh")
_CHAIN_Q = (
    "MATCH (s:Entity)-[r:FACT {group_id: $g, subject_id: $s, relation: $rel}]->(o:Entity) "
    f"RETURN {_FACT_RETURN}"
)
# What a batch reads first, in one statement: which of its episode ids are stored (and where), the entities its
# names are aliases of, and the fact chains of its facts' subjects (found by the subject's name).
_PREFETCH = (
    "CALL { UNWIND $eps AS x OPTIONAL MATCH (n:Episode {id: x}) RETURN collect([x, n.group_id]) AS eps } "
    "CALL { UNWIND $aliases AS k "
    "  OPTIONAL MATCH (a:Alias {group_id: k[0], key: k[1]})-[:ALIAS_OF]->(e:Entity {group_id: k[0]}) "
    f"  WITH k, collect(CASE WHEN e IS NULL THEN null ELSE [a.type, {_E}] END) AS owners "
    "  RETURN collect([k[0], k[1], owners]) AS aliases } "
    "CALL { UNWIND $chains AS c "
    "  MATCH (:Alias {group_id: c[0], key: c[1]})-[:ALIAS_OF]->(s:Entity {group_id: c[0]}) "
    "  CALL { WITH c, s OPTIONAL MATCH (s)-[r:FACT]->(o:Entity) "
    "    WHERE r.subject_id = s.id AND r.relation = c[2] AND r.group_id = c[0] "
    f"    RETURN collect(CASE WHEN r IS NULL THEN null ELSE {{r: {_R}, on: o.name}} END) AS facts }} "
    "  RETURN collect([c[0], s.id, c[2], s.name, facts]) AS chains } "
    # the entities nearest each name no entity has, by an exact scan of the name's group: groups of at most
    # $scan_max entities only (a larger one is searched in the process's mirror of it instead)
    "CALL { UNWIND $sim_groups AS g OPTIONAL MATCH (e:Entity {group_id: g}) WITH g, count(e) AS n "
    "  WHERE n <= $scan_max RETURN collect(g) AS scannable } "
    "CALL { WITH scannable UNWIND $similar AS x WITH x WHERE x.g IN scannable "
    "  OPTIONAL MATCH (:Alias {group_id: x.g, key: x.k})-[:ALIAS_OF]->(known:Entity {group_id: x.g}) "
    "  WITH x, head(collect(known)) AS known WHERE known IS NULL "
    "  CALL { WITH x MATCH (e:Entity {group_id: x.g}) WHERE e.embedding IS NOT NULL "
    "    WITH e, vector.similarity.cosine(e.embedding, x.v) AS s ORDER BY s DESC, e.id LIMIT $sim_k "
    f"    RETURN collect({{e: {_E}, s: s}}) AS near }} "
    "  RETURN collect([x.i, near]) AS similar } "
    "RETURN eps, aliases, chains, scannable, similar"
)


class _SplitBatch(Exception):
    """A failed work of a batch had rows already sent: the batch is rolled back and its works run one by one."""


class _Neo4jWriteTxn:
    """The WriteTxn of the contract over one explicit Neo4j transaction.

    Why it buffers: each Bolt round trip costs ~1-2 ms on loopback and far more across a network, and
    the engine makes a dozen write calls per episode. Writes are queued and sent as one UNWIND statement
    (`_FLUSH`) when the transaction commits. Reads lock their group first (see _LOCK_GROUPS), read the
    server once per key and answer from then on in process, with the queued writes applied (see
    neo4j_overlay): a read never flushes. A batch's likely reads come in one statement up front
    (`prefetch`). Errors a write would have raised at once (unknown entity, duplicate id) are raised at
    the flush instead, always before commit, so the episode is still all-or-nothing. `flushes` counts the
    statements that wrote: a batch (`Neo4jStore.run_transactions`) can drop a failed work's queued rows
    only while none of them was sent.
    """

    def __init__(self, tx: AsyncTransaction,
                 with_pending: Callable[[str, list[Fact]], list[Fact]] = lambda g, facts: facts,
                 mirror_of: Callable[[str, tuple[str | None, int] | None, bool], Awaitable[GroupMirror | None]] | None = None,
                 ) -> None:
        self._tx = tx
        self._with_pending = with_pending  # retrieval counts the store holds but has not written yet
        self._mirror_of = mirror_of  # the group's committed entity vectors, when the store mirrors it
        self._own_vectors: list[tuple[str, str, np.ndarray]] = []  # (group, entity id, vector) written here
        self._p = Pending()
        self._view = Overlay()
        self._locked: set[str] = set()
        self.versions: dict[str, tuple[str | None, int]] = {}  # group -> committed (epoch, version) when locked
        self.round_trips = 0
        self.flushes = 0
        self.broken = False
        self.groups: set[str] = set()  # groups written: their mirrors are stale once this commits

    async def _run(self, query: str, **params: Any) -> list[dict[str, Any]]:
        self.round_trips += 1
        try:
            result = await self._tx.run(query, params)
            return await _rows(result)
        except BaseException:
            self.broken = True  # the server fails the whole transaction with the statement
            raise

    async def lock(self, groups: Iterable[str], *, create: bool = True) -> None:
        """Take the write locks of these groups (sorted), held until the transaction ends."""
        new = sorted(set(groups) - self._locked)
        if not new:
            return
        rows = await self._run(_LOCK_GROUPS if create else _LOCK_EXISTING, groups=new)
        self._locked.update(new)
        # a version node this transaction created is not committed: others read the group as versionless
        self.versions.update((r["g"], (None, 0) if r["fresh"] else (r["e"], int(r["v"]))) for r in rows)

    async def prefetch(self, ahead: Prefetch) -> None:
        """Lock the batch's groups, then read what its works will ask for first, in one statement.

        Nearest entities are read for the groups this process holds no current mirror of (the mirror
        answers the others with no round trip)."""
        await self.lock(ahead.groups())
        mirrored = set()
        if self._mirror_of is not None:
            for g in {g for g, _, _ in ahead.similar}:
                if await self._mirror_of(g, self.versions.get(g), False) is not None:
                    mirrored.add(g)
        await self._read_ahead(replace(ahead, similar=tuple(s for s in ahead.similar if s[0] not in mirrored)))

    async def _read_ahead(self, ahead: Prefetch) -> None:
        """Read what `ahead` names into the overlay, in one statement."""
        if not (ahead.episodes or ahead.aliases or ahead.chains or ahead.similar):
            return
        (got,) = await self._run(
            _PREFETCH, eps=[e for _, e in ahead.episodes], aliases=[list(k) for k in ahead.aliases],
            chains=[list(c) for c in ahead.chains], sim_groups=sorted({g for g, _, _ in ahead.similar}),
            similar=[{"i": i, "g": g, "k": key, "v": _vec(v)} for i, (g, key, v) in enumerate(ahead.similar)],
            sim_k=int(ahead.similar_k), scan_max=EXACT_SCAN_MAX)
        for i, near in got["similar"]:
            g, _, vector = ahead.similar[i]
            for n in near:
                self._view.remember_entity(n["e"])
            self._view.remember_similar(g, vector, ahead.similar_k, {n["e"]["id"]: _cos(n["s"]) for n in near})
        for episode_id, stored_in in got["eps"]:
            self._view.remember_episode(episode_id, stored_in)
        for g, key, owners in got["aliases"]:
            self._view.remember_alias(g, key, [(t, entity) for t, entity in owners])
        for g, subject_id, relation, subject_name, facts in got["chains"]:
            self._view.remember_chain(g, subject_id, relation, [(f["r"], subject_name, f["on"]) for f in facts])

    def mark(self) -> tuple[int, tuple[int, ...], int]:
        """Where the queue stands (see `rewind`)."""
        return self.flushes, self._p.mark(), len(self._own_vectors)

    def rewind(self, mark: tuple[int, tuple[int, ...], int]) -> bool:
        """Drop what was queued since `mark`; False when some of it was already sent (nothing is dropped then)."""
        if self.flushes != mark[0] or self.broken:
            return False
        self._p.truncate(mark[1])
        del self._own_vectors[mark[2]:]
        return True

    async def flush(self) -> None:
        """Send every queued write in one statement; raise StoreIntegrityError naming what was refused."""
        p, self._p = self._p, Pending()
        if not p:
            return
        groups = p.groups()
        self.groups.update(groups)
        self._locked.update(groups)  # the statement's version bump locks them
        self.flushes += 1
        self._view.clear()  # the server's rows are newer than those read
        try:
            rows = await self._run(_FLUSH, groups=groups, eps=p.eps, ents=p.ents, obs=p.obs, links=p.links,
                                   facts=p.facts, upds=p.upds, srcs=p.srcs)
        except nx.ConstraintError as exc:
            raise StoreIntegrityError(f"Neo4j refused the write: {exc.message}") from exc
        got = rows[0]
        missing_obs = [o for o in p.obs if o["id"] not in set(got["obs_hit"])]
        if missing_obs:
            o = missing_obs[0]
            raise StoreIntegrityError(f"entity {o['id']} is not in group {o['g']}")
        hit = set(got["fact_hit"])
        for f in p.facts:
            if f["id"] not in hit:
                raise StoreIntegrityError(
                    f"fact {f['id']!r}: subject {f['subject_id']!r} or object {f['object_id']!r} "
                    f"is not an entity of group {f['group_id']!r}"
                )
        hit = set(got["upd_hit"])
        for u in p.upds:
            if u["id"] not in hit:
                raise StoreIntegrityError(f"fact {u['id']} is not in group {u['g']}")

    async def insert_episode(self, episode: Episode, *, screened: bool, embedding: Vector | None) -> bool:
        """One read (is the id stored?) unless prefetched; the row itself is queued like every other write.

        The group's lock makes a second writer of the same id wait and then see it stored; a writer of
        another group racing for the same id fails on the id's unique constraint: never two episodes.
        """
        if episode.id in self._p.episode_ids:
            return False
        await self.lock([episode.group_id], create=False)
        known, stored_in = self._view.stored_episode_group(episode.id)
        if not known:
            rows = await self._run("MATCH (n:Episode {id: $id}) RETURN n.group_id AS g", id=episode.id)
            stored_in = rows[0]["g"] if rows else None
            self._view.remember_episode(episode.id, stored_in)
        if stored_in is not None:
            if stored_in != episode.group_id:
                raise episode_id_taken(episode.id, episode.group_id, stored_in)
            return False
        p = _episode_params(episode, screened, embedding)
        self._p.eps.append({k: v for k, v in p.items() if v is not None})
        self._p.episode_ids.add(episode.id)
        return True

    async def _entities_now(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """The entities' rows after the flush (read from the server once each); missing ones left out."""
        wanted = list(dict.fromkeys(ids))
        unknown = [eid for eid in wanted if not self._view.entity_known(self._p, eid)]
        if unknown:
            for r in await self._run(f"UNWIND $ids AS id MATCH (e:Entity {{id: id}}) RETURN {_E} AS e", ids=unknown):
                self._view.remember_entity(r["e"])
        aliases = self._view.unknown_aliases(self._p, wanted)
        if aliases:  # who owns the aliases queued observations add decides whether the entity gets them
            await self._read_ahead(Prefetch(aliases=tuple(aliases)))  # type: ignore[arg-type]
        return [row for eid in wanted if (row := self._view.entity(self._p, eid)) is not None]

    async def entity_by_alias(self, group_id: GroupId, alias: str, types: Sequence[str] | None = None) -> Entity | None:
        await self.lock([group_id], create=False)
        if not self._view.alias_known(group_id, alias):
            await self._read_ahead(Prefetch(aliases=((group_id, alias),)))
        owners = self._view.owners(self._p, group_id, alias)  # type -> entity id, after the flush
        rows = {r["id"]: r for r in await self._entities_now(owners.values())}
        found = [(t, rows[eid]) for t, eid in owners.items() if eid in rows and (types is None or t in types)]
        if not found:
            return None
        found.sort(key=lambda tr: _seen_order(tr[1]))  # as the server orders them: first_seen, then id
        return _entity(pick_by_type(found, types))

    async def similar_entities(self, group_id: GroupId, vector: Vector, k: int) -> list[tuple[Entity, float]]:
        """Scored from the group's mirror when the store holds it, else by the server; the entities this
        transaction wrote are scored here too, and every row comes with the queued writes applied.

        Why the mirror: the server's exact scan reads every entity's embedding (~30 us a row: 0.75 s
        at 25k entities), once per new name an episode mentions. The mirror holds what is committed,
        and under the group's lock that is current.
        """
        if k <= 0:
            return []
        await self.lock([group_id], create=False)
        q = np.asarray(vector, dtype=np.float32)
        known = self.versions.get(group_id)
        mirror = await self._mirror_of(group_id, known, False) if self._mirror_of is not None else None
        read_ahead = self._view.similar(group_id, q, k) if mirror is None else None
        if read_ahead is None and mirror is None and self._mirror_of is not None:
            mirror = await self._mirror_of(group_id, known, True)  # not held: load it, waiting a moment
        if read_ahead is not None:
            scores = read_ahead
        elif mirror is not None:
            scores = dict(mirror.tables["entity"].search(q, k))
        else:
            scores = await self._similar_on_server(group_id, vector, k)
        scores.update((eid, float(v @ q)) for g, eid, v in self._own_vectors if g == group_id)
        best = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]
        rows = {r["id"]: r for r in await self._entities_now(eid for eid, _ in best)}
        return [(_entity(rows[eid]), score) for eid, score in best if eid in rows]

    async def _similar_on_server(self, group_id: GroupId, vector: Vector, k: int) -> dict[str, float]:
        rows = await self._run(
            "MATCH (e:Entity {group_id: $g}) WHERE e.embedding IS NOT NULL "
            "WITH e, vector.similarity.cosine(e.embedding, $v) AS s ORDER BY s DESC, e.id LIMIT $k "
            f"RETURN {_E} AS e, s",
            g=group_id, v=_vec(vector), k=int(k),
        )
        for r in rows:
            self._view.remember_entity(r["e"])
        return {r["e"]["id"]: _cos(r["s"]) for r in rows}

    async def insert_entity(self, entity: Entity, embedding: Vector | None) -> None:
        p = {k: v for k, v in _entity_params(entity, embedding).items() if v is not None}
        if any(self._p.claims_alias(entity.group_id, a) for a in p["aliases"]):
            await self.flush()  # the flush creates entities before observations: keep the order they were made in
        self._p.add_entity(p)
        if embedding is not None:
            self._own_vectors.append((entity.group_id, entity.id, np.asarray(embedding, dtype=np.float32)))

    async def observe_entity(
        self, group_id: GroupId, entity_id: str, *, name: str, alias: str, seen: datetime
    ) -> None:
        # an alias already owned by another entity stays with it (first writer wins, as in the embedded store)
        self._p.add_observation({"id": entity_id, "g": group_id, "name": name, "alias": alias, "seen": _utc(seen)})

    async def link_episode_entity(self, group_id: GroupId, episode_id: str, entity_id: str) -> None:
        self._p.links.append({"ep": episode_id, "en": entity_id, "g": group_id})

    async def facts_between(self, group_id: GroupId, subject_id: str, relation: str) -> list[Fact]:
        await self.lock([group_id], create=False)
        if not self._view.chain_known(group_id, subject_id, relation) and subject_id in self._p.ent_by_id:
            self._view.remember_chain(group_id, subject_id, relation, [])  # created here: nothing stored names it
        if not self._view.chain_known(group_id, subject_id, relation):
            rows = await self._run(_CHAIN_Q, g=group_id, s=subject_id, rel=relation)
            self._view.remember_chain(group_id, subject_id, relation, [(x["r"], x["sn"], x["on"]) for x in rows])
        chain = self._view.chain(self._p, group_id, subject_id, relation)
        return self._with_pending(group_id, [_fact(r, sn, on) for r, sn, on in chain])

    async def insert_fact(self, fact: Fact, embedding: Vector | None) -> None:
        self._p.facts.append({k: v for k, v in _fact_params(fact, embedding).items() if v is not None})

    async def update_fact(self, fact: Fact) -> None:
        self._p.upds.append({
            "id": fact.id, "g": fact.group_id, "confidence": float(fact.confidence), "last_seen": _utc(fact.last_seen),
            "valid_at": _utc(fact.valid_at), "invalid_at": _utc(fact.invalid_at), "expired_at": _utc(fact.expired_at),
            "superseded_by": fact.superseded_by,
        })

    async def add_fact_source(self, group_id: GroupId, fact_id: str, episode_id: str, source_message_id: str) -> None:
        if (fact_id, episode_id) in self._p.src_keys:
            return  # already queued: the statement checks stored provenance, not its own earlier rows
        self._p.src_keys.add((fact_id, episode_id))
        self._p.srcs.append({"id": fact_id, "g": group_id, "ep": episode_id, "sm": source_message_id})


_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
MAX_COALESCED = 16  # reads per combined statement
LANE_ANN = 1  # HNSW queries, each sent alone: one costs more than all the other reads of a recall together


def _combine(reads: Sequence[tuple[str, tuple[str, ...], dict[str, Any]]]) -> tuple[str, dict[str, Any]]:
    """Several constant read queries as one statement returning one row, column mb_b<i> = query i's rows.

    Every subquery's rows are collected in the order the subquery returns them, inside a subquery
    of its own (aggregating without grouping keys, so an empty answer still yields one row, []);
    parameters are renamed b<i>_<name> so the reads cannot clash.
    """
    parts: list[str] = []
    params: dict[str, Any] = {}
    done: list[str] = []
    for i, (query, cols, ps) in enumerate(reads):
        text = _PARAM.sub(lambda m, i=i: f"$b{i}_{m.group(1)}", query)
        params.update({f"b{i}_{k}": v for k, v in ps.items()})
        row = "{" + ", ".join(f"{c}: {c}" for c in cols) + "}"
        parts.append(f"CALL {{ CALL {{ {text} }} RETURN collect({row}) AS mb_b{i} }}")
        done.append(f"mb_b{i}")
    return " ".join(parts) + " RETURN " + ", ".join(done), params


class Neo4jStore:
    """GraphStore on Neo4j 5.18+ (5.26 LTS tested), over the async driver."""

    name = "neo4j"

    def __init__(
        self,
        uri: str,
        *,
        user: str | None = None,
        password: str | None = None,
        database: str | None = None,
        connect_timeout_s: float = 30.0,
        max_retry_time_s: float = 5.0,
        ensure_schema: bool = True,
        coalesce_reads: bool = True,
        dim: int = EMBEDDING_DIM,
        vector_cache_mb: int | None = 512,
        mirror_fresh_s: float = MIRROR_FRESH_S,
    ) -> None:
        """`ensure_schema=False` skips creating constraints and indexes at open: for a database whose
        schema an administrator manages (the connecting user may lack schema rights), and for
        throw-away servers in fault tests, where creating 14 indexes is most of the set-up time.

        `vector_cache_mb` bounds the in-process group mirrors (see neo4j_mirror; None: no mirrors,
        every search and walk asks the server). `mirror_fresh_s`: how long a confirmed group version
        is trusted by a walk without asking again (vector searches always ask; see `walk`)."""
        self.ensure_schema = ensure_schema
        self.uri = uri
        self._auth = (user, password or "") if user else None
        self.database = database
        self.connect_timeout_s = connect_timeout_s
        self.max_retry_time_s = max_retry_time_s
        self._driver: AsyncDriver | None = None
        self._write_lock = asyncio.Lock()
        self._shares: dict[tuple[str, str], tuple[float, int, int]] = {}
        self.server_version: tuple[int, ...] = ()
        self.coalesce_reads = coalesce_reads
        self._queued: list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any], int]] = []
        self.read_lanes = True
        self._tasks: set[asyncio.Task[Any]] = set()
        self._refreshing: set[tuple[str, str]] = set()
        # retrieval counts not yet written: (group, fact id) -> count (see mark_retrieved)
        self._retrievals: dict[tuple[str, str], int] = {}
        self._retrieval_task: asyncio.Task[None] | None = None
        self._counting: dict[str, asyncio.Event] = {}  # group -> set once this process's count write is answered
        self.dim = dim
        self.mirror_fresh_s = mirror_fresh_s
        self._mirrors = MirrorCache(dim, vector_cache_mb * 2**20) if vector_cache_mb else None
        self._version_reads: dict[str, tuple[asyncio.Future[Any], float]] = {}  # queued, not yet sent
        self._mirror_loads: dict[str, asyncio.Task[GroupMirror | None]] = {}
        self._catching_up: dict[str, asyncio.Lock] = {}
        self._too_big: dict[str, float] = {}  # group -> monotonic time until which it is not mirrored

    @classmethod
    def from_settings(cls, settings: Any, *, dim: int = EMBEDDING_DIM, vector_cache_mb: int | None = 512) -> Neo4jStore:
        """Build from `StoreSettings.neo4j` (uri, user, password, database) and `StoreSettings.vector_cache_mb`."""
        pw = settings.password.get_secret_value() if settings.password is not None else None
        return cls(settings.uri, user=settings.user, password=pw, database=settings.database, dim=dim,
                   vector_cache_mb=vector_cache_mb)

    # -- lifecycle ------------------------------------------------------------

    async def open(self) -> None:
        """Connect (retrying with backoff while Neo4j is starting or down), check the version, create the schema."""
        if self._driver is not None:
            return
        driver = AsyncGraphDatabase.driver(
            self.uri, auth=self._auth, max_transaction_retry_time=self.max_retry_time_s,
            connection_acquisition_timeout=10.0, connection_timeout=5.0,
            # no server notifications: they are advice for people writing queries at a console
            # (the `CALL { WITH x ... }` form is deprecated from 5.23 but is the only one 5.18-5.22
            # accept; "property key does not exist" fires on every query of a young database),
            # and the driver logs each one as a warning, on the hot path
            notifications_min_severity=NotificationMinimumSeverity.OFF,
        )
        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.2
        last: Exception | None = None
        while True:
            try:
                await driver.verify_connectivity()
                break
            except nx.AuthError as exc:
                await driver.close()
                raise StoreUnavailable(f"Neo4j at {self.uri} refused the credentials: {exc.message}") from exc
            except _TRANSIENT as exc:
                last = exc
            if time.monotonic() + delay > deadline:
                await driver.close()
                raise StoreUnavailable(
                    f"Neo4j at {self.uri} did not answer within {self.connect_timeout_s:.0f} s "
                    f"(last error: {type(last).__name__}: {last}); is the server running?"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
        try:
            await self._check_version(driver)
            if self.ensure_schema:
                await self._ensure_schema(driver)
        except BaseException:
            await driver.close()
            raise
        self._driver = driver

    async def _check_version(self, driver: AsyncDriver) -> None:
        records, _, _ = await driver.execute_query(
            "CALL dbms.components() YIELD name, versions RETURN name, versions[0] AS v", database_=self.database
        )
        raw = next((r["v"] for r in records if r["name"] == "Neo4j Kernel"), records[0]["v"] if records else "0")
        nums = tuple(int(x) for x in re.findall(r"\d+", raw)[:3])
        self.server_version = nums
        if nums[:2] < MIN_VERSION:
            raise StoreIntegrityError(
                f"Neo4j at {self.uri} is version {raw}; mnemobus needs 5.18 or newer because "
                "relationship vector indexes and vector.similarity.cosine arrived in 5.18"
            )

    async def _ensure_schema(self, driver: AsyncDriver) -> None:
        """Create missing constraints and indexes (idempotent; one listing query when all exist)."""
        have: set[str] = set()
        for q in ("SHOW CONSTRAINTS YIELD name", "SHOW INDEXES YIELD name"):
            records, _, _ = await driver.execute_query(q, database_=self.database)
            have.update(r["name"] for r in records)
        if "mb_alias_key" in have:  # aliases keyed without the entity's type: give each its type, then re-key
            async with driver.session(database=self.database) as session:  # IN TRANSACTIONS: auto-commit only
                await (await session.run(
                    "MATCH (a:Alias) WHERE a.type IS NULL OPTIONAL MATCH (a)-[:ALIAS_OF]->(e:Entity) "
                    "CALL { WITH a, e SET a.type = coalesce(e.type, 'thing') } IN TRANSACTIONS OF 10000 ROWS")).consume()
            await driver.execute_query("DROP CONSTRAINT mb_alias_key IF EXISTS", database_=self.database)
        missing = [q for q in SCHEMA if re.search(r"(?:CONSTRAINT|INDEX) (\w+)", q).group(1) not in have]  # type: ignore[union-attr]
        for q in missing:
            try:
                await driver.execute_query(q, database_=self.database)
            except nx.ClientError as exc:
                # another process created an equivalent one between our listing and now
                if "EquivalentSchemaRule" not in (exc.code or "") and "already exists" not in (exc.message or ""):
                    raise StoreIntegrityError(f"creating schema failed: {q}: {exc.message}") from exc
        if missing:
            await driver.execute_query("CALL db.awaitIndexes(300)", database_=self.database)

    async def close(self) -> None:
        task, self._retrieval_task = self._retrieval_task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except BaseException:  # noqa: BLE001 - its work is finished just below
                pass
        if self._driver is not None:
            try:
                await self.flush_retrievals()
            except StoreUnavailable:
                pass  # the server is gone: counts not yet written are lost, as documented
        for t in list(self._tasks):
            t.cancel()
        self._tasks.clear()
        for queued in self._queued:
            fut = queued[3]
            if not fut.done():
                fut.set_exception(StoreUnavailable("the Neo4j store was closed"))
        self._queued = []
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def ping(self) -> None:
        await self._read(lambda tx: _data(tx, "RETURN 1 AS one"))

    # -- plumbing ---------------------------------------------------------------

    def _drv(self) -> AsyncDriver:
        if self._driver is None:
            raise StoreUnavailable("the Neo4j store is not open")
        return self._driver

    async def _read(self, fn: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        try:
            async with self._drv().session(database=self.database) as s:
                return await s.execute_read(fn)
        except _TRANSIENT as exc:
            raise StoreUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}") from exc

    async def _write(self, fn: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        try:
            async with self._drv().session(database=self.database) as s:
                return await s.execute_write(fn)
        except nx.ConstraintError as exc:
            raise StoreIntegrityError(f"Neo4j refused the write: {exc.message}") from exc
        except _TRANSIENT as exc:
            raise StoreUnavailable(f"Neo4j write failed: {type(exc).__name__}: {exc}") from exc

    async def _q(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """A read in one auto-commit transaction: one round trip (a managed transaction needs two).

        Reads are idempotent, so a transient failure (leader switch, dropped
        connection) is retried here with backoff for up to max_retry_time_s.
        """
        deadline = time.monotonic() + self.max_retry_time_s
        delay = 0.05
        while True:
            try:
                async with self._drv().session(database=self.database, default_access_mode=READ_ACCESS) as s:
                    result = await s.run(query, params)
                    return await _rows(result)
            except _RETRYABLE as exc:
                if time.monotonic() + delay > deadline:
                    raise StoreUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            except _TRANSIENT as exc:
                raise StoreUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}") from exc

    async def _qc(self, query: str, cols: tuple[str, ...], *, lane: int = 0, **params: Any) -> list[dict[str, Any]]:
        """A read that may share its round trip with the other reads issued in the same event-loop turn.

        Recall asks for up to six candidate lists at once, then for facts and episodes at once.
        Each Bolt round trip costs 1-2 ms of driver work on loopback (several under load, far more
        across a network), and two cores cannot overlap much of it, so reads queued in one turn
        are sent as one statement: each becomes a `CALL { ... }` whose rows are collected into one
        list column (`cols` names the query's columns). The query text is constant; only its
        parameter names are rewritten apart. When the combined statement fails for a reason other
        than a transient one, each read is retried on its own so one bad read fails only itself.
        Reads of different `lane`s go in separate statements, sent side by side, and LANE_ANN reads
        each alone: the server runs one statement on one thread, and an HNSW query costs more than
        all the other reads of a recall together, so on its own it overlaps them.
        """
        return await self._enqueue(query, cols, lane, params)

    def _enqueue(self, query: str, cols: tuple[str, ...], lane: int, params: dict[str, Any]) -> asyncio.Future[Any]:
        """`_qc` without the wait: the future of the read's rows, queued now (so reads may share it, see `_group_version`)."""
        loop = asyncio.get_running_loop()
        if not self.coalesce_reads:
            return asyncio.ensure_future(self._q(query, **params))
        fut: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
        self._queued.append((query, cols, params, fut, lane if self.read_lanes else 0))
        if len(self._queued) == 1:
            # runs after every task already scheduled for this turn: recall's sibling tasks enqueue first
            loop.call_soon(self._send_queued)
        return fut

    def _send_queued(self) -> None:
        queued, self._queued = self._queued, []
        self._version_reads.clear()  # sent: a read issued from now on must ask again
        lanes: dict[int, list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any]]]] = {}
        for query, cols, params, fut, lane in queued:
            if not fut.done():  # a cancelled caller no longer wants its rows
                lanes.setdefault(lane, []).append((query, cols, params, fut))
        for lane, batch in lanes.items():
            size = 1 if lane == LANE_ANN else MAX_COALESCED
            for i in range(0, len(batch), size):
                task = asyncio.get_running_loop().create_task(self._run_batch(batch[i : i + size]))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _run_batch(self, batch: list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any]]]) -> None:
        try:
            await self._answer_batch(batch)
        finally:  # cancelled (the store is closing) or failed unexpectedly: no caller may wait forever
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(StoreUnavailable("the read was abandoned: the Neo4j store is closing"))

    async def _answer_batch(self, batch: list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any]]]) -> None:
        def settle(fut: asyncio.Future[Any], result: Any = None, exc: BaseException | None = None) -> None:
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)

        # even a read alone is sent combined: its rows come back collected in one record, and each record
        # costs the driver ~0.15 ms (30 fact rows: 7 ms as records, 2.6 ms as one list)
        text, merged = _combine([(q, c, p) for q, c, p, _ in batch])
        try:
            rows = await self._q(text, **merged)
        except StoreUnavailable as exc:
            for *_, fut in batch:
                settle(fut, exc=StoreUnavailable(str(exc)))
            return
        except Exception as err:  # noqa: BLE001 - one read's own error: each read alone, so only it fails
            if len(batch) == 1:
                settle(batch[0][3], exc=err)
                return
            for query, _, params, fut in batch:
                try:
                    settle(fut, await self._q(query, **params))
                except Exception as exc:  # noqa: BLE001
                    settle(fut, exc=exc)
            return
        if len(rows) != 1:  # cannot happen (every part yields exactly one row); never leave a caller waiting
            for *_, fut in batch:
                settle(fut, exc=StoreUnavailable(f"Neo4j answered a combined read with {len(rows)} rows"))
            return
        for i, (*_, fut) in enumerate(batch):
            settle(fut, rows[0][f"mb_b{i}"])

    # -- in-process mirrors (see neo4j_mirror) ------------------------------------------------

    async def _group_version(self, group_id: str) -> tuple[str | None, int, float]:
        """(epoch, version, when asked) of the group, read in the statement of the reads queued beside it.

        Reads of one event-loop turn share one version read: it is sent after all of them were
        issued, so its answer is at least as new as each of them needs.
        """
        shared = self._version_reads.get(group_id) if self.coalesce_reads else None
        if shared is None:
            shared = (self._enqueue(_VERSION_Q, ("e", "v"), 0, {"g": group_id}), time.monotonic())
            if self.coalesce_reads:
                self._version_reads[group_id] = shared
        rows = await asyncio.shield(shared[0])
        return rows[0]["e"], int(rows[0]["v"]), shared[1]

    async def _mirror(self, group_id: str, *, confirm: bool, load: bool = True,
                      known: tuple[str | None, int] | None = None) -> GroupMirror | None:
        """The group's mirror, caught up with the group's current version; None when the server must answer.

        `confirm`: ask for the version now (vector searches, which share the read with the full-text
        queries of their round). Otherwise a version confirmed within `mirror_fresh_s` will do (a
        walk: the second round of a recall, whose first round has just confirmed it), so writes of
        other processes reach a walk at most that late. This process's own writes mark the mirror
        unconfirmed at commit. A group not mirrored starts loading in the background; the server
        answers until it is loaded (a small group loads within MIRROR_WAIT_S and is used at once);
        `load=False`: a group not mirrored yet is answered by the server without starting a load.
        `known`: the group's (epoch, version) read just now under its write lock, which stands in for the
        version read (nobody else commits to the group before the lock is released).
        """
        if self._mirrors is None:
            return None
        mirror = self._mirrors.get(group_id)
        if mirror is None and load:
            mirror = await self._loaded_within(group_id, MIRROR_WAIT_S)
        if mirror is None:
            return None
        if not confirm and time.monotonic() - mirror.checked_at <= self.mirror_fresh_s:
            return mirror
        epoch, version, asked = (*known, time.monotonic()) if known else await self._group_version(group_id)
        if epoch != mirror.epoch:  # rows were deleted (or the group's first version was written): reload
            self._mirrors.drop(group_id)
            if not load:
                return None
            mirror = await self._loaded_within(group_id, MIRROR_WAIT_S)
            if mirror is None or mirror.epoch != epoch:
                return None
        counting = self._counting.get(group_id)
        if version > mirror.version and counting is not None:
            # this process's retrieval counts are being written: when the version read saw them committed,
            # they reach the mirror with the write's answer, which is on its way (see _own_counts_written)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(counting.wait(), OWN_WRITE_WAIT_S)
        if version > mirror.version:
            try:
                await self._catch_up(group_id, mirror, version)
            except Exception as exc:  # noqa: BLE001 - the server answers; the next read loads the group afresh
                log.warning("catching up the mirror of group %s failed: %s", group_id, exc, exc_info=True)
                self._mirrors.drop(group_id)
                return None
        if asked >= mirror.written_at:  # a read issued before this process's last write confirms nothing
            mirror.checked_at = max(mirror.checked_at, asked)
        return mirror

    async def _catch_up(self, group_id: str, mirror: GroupMirror, version: int) -> None:
        """Apply the rows stamped after the mirror's version: the three kinds in one statement."""
        async with self._catching_up.setdefault(group_id, asyncio.Lock()):
            if mirror.version >= version:
                return
            since = mirror.version
            found = await asyncio.gather(*(self._qc(DELTA[k], LOAD_COLUMNS[k], g=group_id, since=since) for k in KINDS))
            for kind, rows in zip(KINDS, found, strict=True):
                mirror.apply(kind, rows)
            mirror.version = max(mirror.version, version)  # rows newer than `version` are applied again later
        mirror.maintain_indexes(background=True)
        if self._mirrors is not None and not self._mirrors.evict():
            self._too_big[group_id] = time.monotonic() + MIRROR_TOO_BIG_S

    async def _loaded_within(self, group_id: str, timeout_s: float | None) -> GroupMirror | None:
        """Start loading the group's mirror (unless it is loading) and wait for it at most timeout_s."""
        if self._too_big.get(group_id, 0.0) > time.monotonic():
            return None
        task = self._mirror_loads.get(group_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load_mirror(group_id))
            self._mirror_loads[group_id] = task
            self._tasks.add(task)
            task.add_done_callback(lambda t: (self._tasks.discard(t), self._mirror_loads.pop(group_id, None)))
        await asyncio.wait({task}, timeout=timeout_s)  # never cancels the load
        return task.result() if task.done() and not task.cancelled() else None

    async def _load_mirror(self, group_id: str) -> GroupMirror | None:
        """Read the whole group into a new mirror: stamped rows a page (one record) at a time, then any rows
        written before versions existed, LOAD_FETCH a fetch. Pages are small enough that decoding one never
        holds the event loop long.

        The version is read first: rows written meanwhile are newer than it and read again by the next catch-up
        (a row updated while the pages pass is read at its new version, by a later page or the catch-up).
        """
        assert self._mirrors is not None
        budget = self._mirrors.budget

        def too_big() -> None:
            self._too_big[group_id] = time.monotonic() + MIRROR_TOO_BIG_S
            log.warning("group %s needs more than store.vector_cache_mb: not mirrored", group_id)

        try:
            rows = await self._q(_VERSION_Q, g=group_id)  # unconfirmed: this process may write while it loads
            mirror = GroupMirror(self.dim, rows[0]["e"], int(rows[0]["v"]))
            async with self._drv().session(database=self.database, default_access_mode=READ_ACCESS,
                                           fetch_size=LOAD_FETCH) as s:
                result = await s.run(Query(SIZES, timeout=LOAD_PAGE_TIMEOUT_S), {"g": group_id})
                sizes = await result.single(strict=True)
                if sum(sizes.values()) * self.dim * 4 > budget:  # the embeddings alone
                    return too_big()
                for kind in KINDS:
                    mirror.tables[kind].reserve(int(sizes[kind]))
                for kind in KINDS:
                    cols = LOAD_COLUMNS[kind]

                    async def page_after(ver: int, row_id: str, kind: str = kind) -> AsyncResult:
                        return await s.run(Query(PAGE[kind], timeout=LOAD_PAGE_TIMEOUT_S),
                                           {"g": group_id, "v": ver, "id": row_id, "k": LOAD_PAGE})

                    result = await page_after(-1, "")
                    while True:
                        page = (await result.single(strict=True))["rows"]
                        full = len(page) == LOAD_PAGE
                        if full:  # the server reads the next page while this one is applied
                            result = await page_after(page[-1][1], page[-1][0])  # after this (ver, id)
                        mirror.apply(kind, [dict(zip(cols, row, strict=True)) for row in page])
                        if mirror.nbytes > budget:
                            return too_big()
                        if not full:
                            break
                    result = await s.run(Query(UNSTAMPED[kind], timeout=LOAD_TIMEOUT_S), {"g": group_id})
                    batch: list[dict[str, Any]] = []
                    async for record in result:
                        batch.append(dict(record))
                        if len(batch) >= LOAD_FETCH:
                            mirror.apply(kind, batch)
                            batch = []
                            if mirror.nbytes > budget:
                                return too_big()
                    mirror.apply(kind, batch)
        except Exception as exc:  # noqa: BLE001 - a mirror is an optimisation: the server answers meanwhile
            log.warning("loading the mirror of group %s failed (the server answers meanwhile): %s", group_id, exc)
            return None
        if not self._mirrors.put(group_id, mirror):
            self._too_big[group_id] = time.monotonic() + MIRROR_TOO_BIG_S
            return None
        mirror.maintain_indexes(background=True)
        return mirror

    async def preload(self, group_id: GroupId, *, wait_for_indexes: bool = True) -> bool:
        """Mirror the group now (benchmarks, tests, a service warming its busiest groups); True when it is held."""
        if self._mirrors is None:
            return False
        if group_id not in self._mirrors:
            await self._loaded_within(group_id, None)
        mirror = await self._mirror(group_id, confirm=True)
        if mirror is None:
            return False
        mirror.maintain_indexes(background=True)
        while wait_for_indexes and any(t.building for t in mirror.tables.values()):
            await asyncio.sleep(0.05)
        return True

    async def warm(self, max_groups: int) -> list[GroupId]:
        """Mirror the most recently written groups (by their newest episode), until `max_groups` or until the
        mirrors fill nine tenths of store.vector_cache_mb; the groups mirrored. Their vector indexes build in
        the background. One pass over the episodes finds them: once at start, off the request path."""
        if self._mirrors is None or max_groups <= 0:
            return []
        rows = await self._q("MATCH (n:Episode) WITH n.group_id AS g, max(n.created_at) AS t "
                             "RETURN g ORDER BY t DESC LIMIT $k", k=max_groups)
        warmed: list[GroupId] = []
        for row in rows:
            if self._mirrors.held_bytes() >= 0.9 * self._mirrors.budget:
                break
            if await self.preload(GroupId(row["g"]), wait_for_indexes=False):
                warmed.append(GroupId(row["g"]))
        return warmed

    def _mark_written(self, groups: Iterable[str]) -> None:
        """Committed writes of this process: the next read of each group confirms its version first."""
        if self._mirrors is not None:
            now = time.monotonic()
            for g in groups:
                self._mirrors.stale(g, now)

    async def _mirror_search(self, kind: str, group_id: GroupId, vector: Vector, k: int,
                             as_of: datetime | None = None) -> list[Hit] | None:
        """Nearest rows from the group's mirror; None when it is not mirrored (the caller asks the server)."""
        if k <= 0:
            return []
        mirror = await self._mirror(group_id, confirm=True)
        if mirror is None:
            return None
        valid = mirror.facts.valid_at_time(_us(as_of)) if as_of is not None else None
        found = mirror.tables[kind].search(np.asarray(vector, dtype=np.float32), k, valid)
        return [Hit(i, s) for i, s in found]

    # -- episodes -----------------------------------------------------------------

    async def get_episode(self, group_id: GroupId, episode_id: str) -> Episode | None:
        rows = await self._q(
            f"MATCH (n:Episode {{id: $id, group_id: $g}}) RETURN {_N_EPISODE} AS n", id=episode_id, g=group_id
        )
        return _episode(rows[0]["n"]) if rows else None

    async def episodes(self, group_id: GroupId, last_n: int = 10) -> list[Episode]:
        rows = await self._q(
            f"MATCH (n:Episode {{group_id: $g}}) RETURN {_N_EPISODE} AS n "
            "ORDER BY n.reference_time DESC, n.created_at DESC, n.id LIMIT $k",
            g=group_id, k=int(last_n),
        )
        return [_episode(r["n"]) for r in rows]

    async def count_episodes(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._q("MATCH (n:Episode) RETURN count(n) AS c")
        else:
            rows = await self._q("MATCH (n:Episode {group_id: $g}) RETURN count(n) AS c", g=group_id)
        return int(rows[0]["c"])

    async def count_screened(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._q("MATCH (n:Episode) WHERE n.screened RETURN count(n) AS c")
        else:
            rows = await self._q("MATCH (n:Episode {group_id: $g}) WHERE n.screened RETURN count(n) AS c", g=group_id)
        return int(rows[0]["c"])

    async def get_episodes(self, group_id: GroupId, episode_ids: Sequence[str]) -> list[Episode]:
        """From the group's mirror when it holds every episode asked (see `get_facts`), else from the server."""
        if not episode_ids:
            return []
        mirror = await self._mirror(group_id, confirm=False, load=False)
        held = mirror.episode_records(episode_ids) if mirror is not None else None
        if held is not None:
            return [_episode({**r, "group_id": group_id}) for r in held]
        rows = await self._qc(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (n:Episode {id: $ids[i], group_id: $g}) "
            f"RETURN {_N_EPISODE} AS n ORDER BY i", ("n",),
            ids=list(episode_ids), g=group_id,
        )
        return [_episode(r["n"]) for r in rows]

    async def delete_fact(self, group_id: GroupId, fact_id: str) -> DeleteCounts:
        async def work(tx: AsyncManagedTransaction) -> DeleteCounts:
            dropped = await _drop_facts(tx, group_id, [fact_id])
            if dropped:
                await _data(tx, _NEW_EPOCH, {"g": group_id})  # another fact may be valid again: mirrors reload
            return DeleteCounts(facts=dropped)

        counts = await self._write(work)
        if counts.facts:
            self._mark_written([group_id])
        return counts

    async def erase_residue(self) -> None:
        """Nothing a client can do: deleted records stay in Neo4j's store files and transaction logs until the
        server reuses the space or rotates the logs (db.checkpoint is Enterprise-only). docs/api.md says so."""

    async def delete_group(self, group_id: GroupId) -> DeleteCounts:
        """Remove the group in transactions of at most DELETE_BATCH rows of a kind.

        A group that fits in one batch goes in one transaction, as before. A larger one
        cannot: the transaction state of 100k deleted facts exceeded the server's
        transaction memory limit (dbms.memory.transaction.total.max, 70% of a 1 GiB heap).
        Facts go first, then entities, aliases and episodes; a failure part-way leaves a
        smaller group, and calling again finishes the job.
        """
        for key in [k for k in self._retrievals if k[0] == group_id]:
            del self._retrievals[key]

        async def work(tx: AsyncManagedTransaction) -> tuple[int, int, int, bool]:
            p = {"g": group_id, "n": DELETE_BATCH}
            await _data(tx, _NEW_EPOCH, p)  # mirrors of the group reload it (smaller, or gone)
            f = (await _data(tx, "MATCH ()-[r:FACT {group_id: $g}]->() WITH r LIMIT $n DELETE r RETURN count(r) AS c", p))[0]["c"]
            if f >= DELETE_BATCH:
                return f, 0, 0, False
            e = (await _data(tx, "MATCH (n:Entity {group_id: $g}) WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
            if e >= DELETE_BATCH:
                return f, e, 0, False
            a = (await _data(tx, "MATCH (n:Alias {group_id: $g}) WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
            if a >= DELETE_BATCH:
                return f, e, 0, False
            ep = (await _data(tx, "MATCH (n:Episode {group_id: $g}) WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
            if ep < DELETE_BATCH:
                await _data(tx, "MATCH (gv:GroupVersion {group_id: $g}) DELETE gv", p)
            return f, e, ep, ep < DELETE_BATCH

        facts = entities = episodes = 0
        if self._mirrors is not None:
            self._mirrors.drop(group_id)
        while True:
            f, e, ep, done = await self._write(work)
            facts, entities, episodes = facts + f, entities + e, episodes + ep
            if done:
                return DeleteCounts(episodes=episodes, entities=entities, facts=facts)

    async def delete_episode(self, group_id: GroupId, episode_id: str) -> DeleteCounts:
        """Forget one episode (a user's "delete that message"), in one transaction.

        The episode leaves every fact's provenance; a fact left with no source
        goes, and the facts it had superseded become valid again (the
        contradiction came from the forgotten episode). An entity the episode
        mentioned goes once no episode mentions it and no fact names it, with
        its aliases. Finding the sourced facts scans the group's facts (no
        index over a list property): deletions are rare, recall is not.
        """

        async def work(tx: AsyncManagedTransaction) -> DeleteCounts:
            p = {"g": group_id, "ep": episode_id}
            if not await _data(tx, "MATCH (n:Episode {id: $ep, group_id: $g}) RETURN n.id AS id", p):
                return DeleteCounts()
            await _data(tx, _NEW_EPOCH, p)  # facts go and others become valid again: mirrors reload the group
            sourced = await _data(
                tx,
                "MATCH ()-[r:FACT {group_id: $g}]->() WHERE $ep IN coalesce(r.episode_ids, []) "
                "WITH r, [i IN range(0, size(r.episode_ids) - 1) WHERE r.episode_ids[i] <> $ep] AS keep "
                "WITH r, [i IN keep | r.episode_ids[i]] AS eps, [i IN keep | r.source_message_ids[i]] AS sms "
                "SET r.episode_ids = eps, r.source_message_ids = sms "
                "RETURN r.id AS id, size(eps) = 0 AS orphan",
                p,
            )
            orphans = [r["id"] for r in sourced if r["orphan"]]
            await _drop_facts(tx, group_id, orphans)
            gone = await _data(
                tx,
                "MATCH (ep:Episode {id: $ep, group_id: $g}) "
                "OPTIONAL MATCH (ep)-[:MENTIONS]->(e:Entity {group_id: $g}) "
                "WITH ep, collect(DISTINCT e) AS mentioned DETACH DELETE ep "
                "WITH mentioned UNWIND mentioned AS e "
                "WITH e WHERE NOT EXISTS { (e)<-[:MENTIONS]-(:Episode) } AND NOT EXISTS { (e)-[:FACT]-() } "
                "OPTIONAL MATCH (a:Alias {group_id: $g})-[:ALIAS_OF]->(e) "
                "WITH e, collect(a) AS aliases FOREACH (a IN aliases | DETACH DELETE a) DETACH DELETE e "
                "RETURN count(*) AS c",
                p,
            )
            return DeleteCounts(episodes=1, entities=int(gone[0]["c"]) if gone else 0, facts=len(orphans))

        counts = await self._write(work)
        self._mark_written([group_id])
        return counts

    @asynccontextmanager
    async def _write_txn(self) -> AsyncIterator[_Neo4jWriteTxn]:
        """An explicit transaction behind a WriteTxn: flushed and committed on normal exit, rolled back otherwise.

        The caller holds the write lock. Committed groups' mirrors are marked unconfirmed.
        """
        try:
            async with self._drv().session(database=self.database) as s:
                tx = await s.begin_transaction()
                wtx = _Neo4jWriteTxn(tx, self._with_pending,
                                     lambda g, known, load: self._mirror(g, confirm=True, known=known, load=load))
                try:
                    yield wtx
                    await wtx.flush()
                except BaseException:
                    try:
                        await tx.rollback()
                    except _TRANSIENT:
                        pass  # the server drops an unfinished transaction when the connection goes
                    raise
                await tx.commit()
        except nx.ConstraintError as exc:
            raise StoreIntegrityError(f"Neo4j refused the write: {exc.message}") from exc
        except _TRANSIENT as exc:
            raise StoreUnavailable(f"Neo4j write failed, nothing stored: {type(exc).__name__}: {exc}") from exc
        self._mark_written(wtx.groups)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Neo4jWriteTxn]:
        """One explicit transaction for one episode: committed on normal exit, rolled back otherwise."""
        async with self._write_lock:
            async with self._write_txn() as wtx:
                yield wtx

    async def run_transactions(self, works: Sequence[Callable[[_Neo4jWriteTxn], Awaitable[T]]],
                               prefetch: Prefetch | None = None) -> list[T | Exception]:
        """Every work atomic on its own, the batch in one transaction with one commit (contract: BatchTransactions).

        Why: the commit is most of an episode's cost on Neo4j (index updates and the log force
        happen there). Neo4j has no savepoints, so a failing work is isolated in one of two ways.
        While all it wrote is still queued in the WriteTxn (the usual case: the queue is sent at
        the end), its rows are dropped and the batch goes on. When some of them were already sent
        (a read made the queue flush), or the batch's final flush is refused (an integrity error
        belongs to some work), the transaction is rolled back and every work not yet failed runs
        again in a transaction of its own, so only the bad one fails. A store failure fails every
        slot, as the contract asks; episodes are idempotent by id, so the caller's retry is safe.

        The transaction first locks the groups `prefetch` names and reads what it names (one round trip
        each, see _Neo4jWriteTxn.prefetch). A batch that lost a deadlock to another writer (a group it had
        not named locked out of order) is run again, at most LOCK_RETRIES times.
        """
        if not works:
            return []
        failed: dict[int, Exception] = {}
        async with self._write_lock:
            for attempt in range(LOCK_RETRIES + 1):
                failed.clear()
                try:
                    done = await self._one_transaction(works, failed, prefetch)
                    break
                except StoreUnavailable as exc:
                    if attempt == LOCK_RETRIES or not _lost_a_lock_race(exc):
                        return [exc for _ in works]
                    log.info("a batch of %d writes lost a deadlock to another writer; running it again", len(works))
                    await asyncio.sleep(0.01 * 2**attempt)
        if done is not None:
            return done
        log.warning("a batch of %d writes was rolled back (%d failed on their own); running each in its own "
                    "transaction so only the bad one fails", len(works), len(failed))
        out: list[T | Exception] = []
        for i, work in enumerate(works):
            if i in failed:
                out.append(failed[i])
                continue
            result: T | Exception
            try:
                async with self.transaction() as txn:
                    result = await work(txn)
            except Exception as exc:  # noqa: BLE001 - returned in the work's slot
                result = exc
            out.append(result)
        return out

    async def _one_transaction(self, works: Sequence[Callable[[_Neo4jWriteTxn], Awaitable[T]]],
                               failed: dict[int, Exception], prefetch: Prefetch | None) -> list[T | Exception] | None:
        """The batch in one transaction; None when it was rolled back and must be split (`failed`: works that failed alone)."""
        results: list[T | Exception] = []
        try:
            async with self._write_txn() as wtx:
                if prefetch is not None:
                    await wtx.prefetch(prefetch)
                for i, work in enumerate(works):
                    mark = wtx.mark()
                    try:
                        results.append(await work(wtx))
                    except (StoreUnavailable, *_TRANSIENT):
                        raise
                    except Exception as exc:  # noqa: BLE001 - the work's own failure
                        if not wtx.rewind(mark):
                            raise _SplitBatch from exc
                        failed[i] = exc
                        results.append(exc)
        except (_SplitBatch, StoreIntegrityError):
            return None
        return results

    # -- candidate queries ------------------------------------------------------------

    async def search_facts_text(self, group_id: GroupId, terms: Sequence[str], as_of: datetime, limit: int) -> list[Hit]:
        """Lucene top hits, bounded by the index's own limit, then filtered to facts valid at as_of.

        The index cannot filter on time, so it is asked for 4x the hits wanted; when
        validity filtering leaves too few and the index had more to give, it is asked
        again for 10x as many, so the answer never depends on the over-fetch factor.
        """
        q = lucene_terms(terms)
        k = int(limit)
        if not q or k <= 0:
            return []
        fetch = max(4 * k, 50)
        while True:
            rows = await self._qc(
                "CALL db.index.fulltext.queryRelationships('mb_fact_text', $q, {limit: $fetch}) "
                "YIELD relationship AS r, score WITH collect([r, score]) AS hits "
                "RETURN size(hits) AS raw, [h IN hits WHERE h[0].group_id = $g "
                "AND (h[0].valid_at IS NULL OR h[0].valid_at <= $as_of) "
                "AND (h[0].invalid_at IS NULL OR $as_of < h[0].invalid_at) | [h[0].id, h[1]]][..$k] AS rows",
                ("raw", "rows"), q=f"+gk:{group_key(group_id)} +({q})", g=group_id, as_of=_utc(as_of), k=k, fetch=fetch,
            )
            raw, hits = rows[0]["raw"], rows[0]["rows"]
            if len(hits) >= k or raw < fetch:
                return [Hit(i, float(sc)) for i, sc in hits]
            fetch *= 10

    async def _group_share(self, kind: str, count_q: str, total_q: str, group_id: GroupId) -> tuple[int, int]:
        """(rows of the group, rows of the store) in one vector index, refreshed every SHARE_TTL_S.

        Why: the vector index spans every group, so how many neighbours to ask it for
        depends on the group's share of it. Counting is index-backed but not free (tens of
        ms at 100k rows), and the share moves slowly: a figure up to a minute old sizes a
        fetch well enough, so an expired one is still used while a background count
        replaces it, and only a group never counted waits for its count.
        """
        key = (kind, group_id)
        hit = self._shares.get(key)
        if hit is None:
            return await self._count_share(key, count_q, total_q)
        if time.monotonic() - hit[0] >= SHARE_TTL_S and key not in self._refreshing:
            self._refreshing.add(key)
            task = asyncio.get_running_loop().create_task(self._count_share(key, count_q, total_q))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return hit[1], hit[2]

    async def _count_share(self, key: tuple[str, str], count_q: str, total_q: str) -> tuple[int, int]:
        try:
            rows = await self._qc(f"CALL {{ {count_q} }} CALL {{ {total_q} }} RETURN c, t", ("c", "t"), g=key[1])
        except StoreUnavailable:
            if key in self._shares:  # a background refresh: the old figure stays
                return self._shares[key][1], self._shares[key][2]
            raise
        finally:
            self._refreshing.discard(key)
        share = (int(rows[0]["c"]), int(rows[0]["t"]))
        if len(self._shares) > 10_000:
            self._shares.clear()
        self._shares[key] = (time.monotonic(), *share)
        return share

    async def search_facts_vector(self, group_id: GroupId, vector: Vector, as_of: datetime, limit: int) -> list[Hit]:
        """From the group's mirror when it is held (see `_mirror`), else from the server."""
        found = await self._mirror_search("fact", group_id, vector, int(limit), as_of)
        if found is not None:
            return found
        params = {"g": group_id, "v": _vec(vector), "as_of": _utc(as_of), "k": int(limit)}
        exact = (
            "MATCH ()-[r:FACT {group_id: $g}]->() WHERE r.embedding IS NOT NULL AND " + _VALID + " "
            "WITH r, vector.similarity.cosine(r.embedding, $v) AS s ORDER BY s DESC, r.id LIMIT $k "
            "RETURN r.id AS id, s"
        )
        ann = (
            "CALL db.index.vector.queryRelationships('mb_fact_vec', $n, $v) YIELD relationship AS r, score "
            "WHERE r.group_id = $g AND " + _VALID + " WITH r ORDER BY score DESC LIMIT $k2 "
            "WITH r, vector.similarity.cosine(r.embedding, $v) AS s RETURN r.id AS id, s ORDER BY s DESC, r.id LIMIT $k"
        )
        return await self._vector_search(
            "fact", exact, ann, params,
            "MATCH ()-[r:FACT {group_id: $g}]->() RETURN count(r) AS c",
            "MATCH ()-[r:FACT]->() RETURN count(r) AS t",
        )

    async def _vector_search(
        self, kind: str, exact: str, ann: str, params: dict[str, Any], count_q: str, total_q: str
    ) -> list[Hit]:
        """Bounded nearest-neighbour search inside one group.

        A small group is scanned exactly (cheap, and exactly the embedded store's
        answer), and so is a group too small a share of the index for a bounded
        ANN query to reach its members. A large one asks the shared HNSW index for
        k neighbours scaled by the inverse of the group's share, so about 3k of
        them are the group's; if filtering still leaves fewer than k, the exact
        scan answers instead.
        Only the best 2k of the index's (possibly quantized) scores are rescored
        exactly: reading every candidate's 3 KiB embedding back was the slowest
        part of a recall at 100k facts.
        """
        k = params["k"]
        if k <= 0:
            return []
        in_group, total = await self._group_share(kind, count_q, total_q, params["g"])
        n = max(ANN_OVERSAMPLE * k * total // max(in_group, 1), 50)
        if in_group <= EXACT_SCAN_MAX + 2 * n or n > ANN_MAX:
            # small, or too small a share of the index for its neighbours to be found there
            rows = await self._qc(exact, ("id", "s"), **params)
            return [Hit(r["id"], _cos(r["s"])) for r in rows]
        rows = await self._qc(ann, ("id", "s"), lane=LANE_ANN, n=n, k2=2 * k, **params)
        if len(rows) < k:
            rows = await self._qc(exact, ("id", "s"), **params)
        return [Hit(r["id"], _cos(r["s"])) for r in rows]

    async def search_entities_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        q = lucene_terms(terms)
        if not q or limit <= 0:
            return []
        rows = await self._qc(
            "CALL db.index.fulltext.queryNodes('mb_entity_text', $q, {limit: $k}) YIELD node AS n, score "
            "WHERE n.group_id = $g RETURN n.id AS id, score", ("id", "score"),
            q=f"+gk:{group_key(group_id)} +({q})", g=group_id, k=int(limit),
        )
        return [Hit(r["id"], float(r["score"])) for r in rows]

    async def search_entities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        found = await self._mirror_search("entity", group_id, vector, int(limit))
        if found is not None:
            return found
        params = {"g": group_id, "v": _vec(vector), "k": int(limit)}
        exact = (
            "MATCH (n:Entity {group_id: $g}) WHERE n.embedding IS NOT NULL "
            "WITH n, vector.similarity.cosine(n.embedding, $v) AS s ORDER BY s DESC, n.id LIMIT $k "
            "RETURN n.id AS id, s"
        )
        ann = (
            "CALL db.index.vector.queryNodes('mb_entity_vec', $n, $v) YIELD node AS n, score "
            "WHERE n.group_id = $g WITH n ORDER BY score DESC LIMIT $k2 "
            "WITH n, vector.similarity.cosine(n.embedding, $v) AS s RETURN n.id AS id, s ORDER BY s DESC, n.id LIMIT $k"
        )
        return await self._vector_search(
            "entity", exact, ann, params,
            "MATCH (n:Entity {group_id: $g}) RETURN count(n) AS c", "MATCH (n:Entity) RETURN count(n) AS t",
        )

    async def search_episodes_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        q = lucene_terms(terms)
        if not q or limit <= 0:
            return []
        rows = await self._qc(
            "CALL db.index.fulltext.queryNodes('mb_episode_text', $q, {limit: $k}) YIELD node AS n, score "
            "WHERE n.group_id = $g RETURN n.id AS id, score", ("id", "score"),
            q=f"+gk:{group_key(group_id)} +({q})", g=group_id, k=int(limit),
        )
        return [Hit(r["id"], float(r["score"])) for r in rows]

    async def search_episodes_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        found = await self._mirror_search("episode", group_id, vector, int(limit))
        if found is not None:
            return found
        params = {"g": group_id, "v": _vec(vector), "k": int(limit)}
        exact = (
            "MATCH (n:Episode {group_id: $g}) WHERE n.embedding IS NOT NULL "
            "WITH n, vector.similarity.cosine(n.embedding, $v) AS s ORDER BY s DESC, n.id LIMIT $k "
            "RETURN n.id AS id, s"
        )
        ann = (
            "CALL db.index.vector.queryNodes('mb_episode_vec', $n, $v) YIELD node AS n, score "
            "WHERE n.group_id = $g WITH n ORDER BY score DESC LIMIT $k2 "
            "WITH n, vector.similarity.cosine(n.embedding, $v) AS s RETURN n.id AS id, s ORDER BY s DESC, n.id LIMIT $k"
        )
        return await self._vector_search(
            "episode", exact, ann, params,
            "MATCH (n:Episode {group_id: $g}) RETURN count(n) AS c", "MATCH (n:Episode) RETURN count(n) AS t",
        )

    async def walk(
        self,
        group_id: GroupId,
        entity_ids: Sequence[str],
        *,
        as_of: datetime,
        max_hops: int,
        relations: Sequence[str] | None = None,
        edge_types: Sequence[EdgeType] | None = None,
        limit: int = 50,
    ) -> list[Step]:
        """Breadth-first; each hop's facts by confidence then id, as the embedded store orders them.

        From the group's mirror when it is held and confirmed within `mirror_fresh_s` (no round
        trip), else one server query per hop. Ids, confidences and endpoint ids only: the rows are
        read by `get_facts` for the few kept.
        """
        mirror = await self._mirror(group_id, confirm=False)
        if mirror is not None:
            steps = mirror.facts.walk(list(entity_ids), _us(as_of), max_hops, relations, edge_types, int(limit))
            return [Step(fid, hop, conf) for fid, hop, conf in steps]
        seen_facts: set[str] = set()
        visited: set[str] = set(entity_ids)
        frontier = list(dict.fromkeys(entity_ids))
        out: list[Step] = []
        for hop in range(1, max_hops + 1):
            if not frontier or len(out) >= limit:
                break
            rows = await self._qc(
                "UNWIND $front AS eid MATCH (a:Entity {id: eid, group_id: $g})-[r:FACT {group_id: $g}]-(:Entity) "
                f"WHERE {_VALID} AND ($rels IS NULL OR r.relation IN $rels) "
                "AND ($types IS NULL OR r.edge_type IN $types) AND NOT r.id IN $seen "
                "WITH DISTINCT r ORDER BY r.confidence DESC, r.id LIMIT $k "
                "RETURN r.id AS id, r.confidence AS c, r.subject_id AS s, r.object_id AS o", ("id", "c", "s", "o"),
                # only what can still be returned: if this hop fills the limit the walk ends here,
                # and otherwise every fact of the hop is returned and expands the frontier
                front=frontier, g=group_id, k=int(limit) - len(out), as_of=_utc(as_of), seen=list(seen_facts),
                rels=list(relations) if relations else None,
                types=list(edge_types) if edge_types else None,
            )
            nxt: list[str] = []
            for x in rows:
                fid = x["id"]
                if fid in seen_facts:
                    continue
                seen_facts.add(fid)
                if len(out) < limit:
                    out.append(Step(fid, hop, float(x["c"])))
                for e in (x["s"], x["o"]):
                    if e not in visited:
                        visited.add(e)
                        nxt.append(e)
            frontier = nxt
        return out[:limit]

    # -- fetches -------------------------------------------------------------------------

    async def get_facts(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Fact]:
        """From the group's mirror when it holds every fact asked and was confirmed within `mirror_fresh_s`
        (as `walk` trusts it: in a recall, by the candidate round just before), else from the server.

        The mirror holds every field of a fact, each write of one (renamed endpoints, new sources, updates,
        retrieval counts) stamps it, and deletions reload the group: the answer is the server's.
        """
        if not fact_ids:
            return []
        mirror = await self._mirror(group_id, confirm=False, load=False)
        held = mirror.fact_records(fact_ids) if mirror is not None else None
        if held is not None:
            return self._with_pending(group_id, [_fact({**r, "group_id": group_id}, sn, on) for r, sn, on in held])
        rows = await self._qc(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (s:Entity)-[r:FACT {id: $ids[i], group_id: $g}]->(o:Entity) "
            f"RETURN {_FACT_RETURN} ORDER BY i", ("r", "sn", "on"),
            ids=list(fact_ids), g=group_id,
        )
        return self._with_pending(group_id, [_fact(x["r"], x["sn"], x["on"]) for x in rows])

    async def get_entities(self, group_id: GroupId, entity_ids: Sequence[str]) -> list[Entity]:
        rows = await self._q(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (n:Entity {id: $ids[i], group_id: $g}) "
            f"RETURN {_N_ENTITY} AS n ORDER BY i",
            ids=list(entity_ids), g=group_id,
        )
        return [_entity(r["n"]) for r in rows]

    async def facts_valid_at(self, group_id: GroupId, as_of: datetime, limit: int = 1000) -> list[Fact]:
        rows = await self._q(
            f"MATCH (s:Entity)-[r:FACT {{group_id: $g}}]->(o:Entity) WHERE {_VALID} "
            f"RETURN {_FACT_RETURN} ORDER BY r.valid_at IS NOT NULL, r.valid_at, r.id LIMIT $k",
            g=group_id, as_of=_utc(as_of), k=int(limit),
        )
        return self._with_pending(group_id, [_fact(x["r"], x["sn"], x["on"]) for x in rows])

    async def edge_history(self, group_id: GroupId, subject_id: str, relation: str | None = None) -> list[Fact]:
        rows = await self._q(
            "MATCH (s:Entity)-[r:FACT {group_id: $g, subject_id: $s}]->(o:Entity) "
            "WHERE $rel IS NULL OR r.relation = $rel "
            f"RETURN {_FACT_RETURN} ORDER BY r.valid_at IS NULL, r.valid_at DESC, r.created_at DESC, r.id",
            g=group_id, s=subject_id, rel=relation,
        )
        return self._with_pending(group_id, [_fact(x["r"], x["sn"], x["on"]) for x in rows])

    async def mark_retrieved(self, group_id: GroupId, fact_ids: Sequence[str]) -> None:
        """Counted in memory and written in one statement within RETRIEVAL_FLUSH_S: recall never waits on a write.

        Reads through this store add the counts not yet written (as the embedded store does);
        other processes see them once written. close() writes what is left.
        """
        for fid in fact_ids:
            key = (group_id, fid)
            self._retrievals[key] = self._retrievals.get(key, 0) + 1
        if not self._retrievals or self._driver is None:
            return
        if self._retrieval_task is None or self._retrieval_task.done():
            self._retrieval_task = asyncio.get_running_loop().create_task(self._write_retrievals_later())

    async def _write_retrievals_later(self) -> None:
        deadline = time.monotonic() + RETRIEVAL_FLUSH_S
        while self._retrievals and self._driver is not None:
            while len(self._retrievals) < RETRIEVAL_BACKLOG and time.monotonic() < deadline:
                await asyncio.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))
            try:
                await self.flush_retrievals()
            except StoreUnavailable:
                pass  # kept (or dropped when the outcome is unknown); tried again after another wait
            deadline = time.monotonic() + RETRIEVAL_FLUSH_S

    async def flush_retrievals(self) -> None:
        """Write the retrieval counts held in memory, in one transaction.

        A failure the server certainly did not commit puts the counts back to be written later;
        a commit whose outcome is unknown drops them (one retrieval lost rather than counted twice).
        """
        pending, self._retrievals = self._retrievals, {}
        if not pending:
            return
        rows = [{"g": g, "id": fid, "n": n} for (g, fid), n in pending.items()]
        groups = sorted({g for g, _ in pending})
        answered = asyncio.Event()
        self._counting.update((g, answered) for g in groups)
        sent = time.monotonic()
        try:
            got = await self._write(unit_of_work(timeout=RETRIEVAL_WRITE_TIMEOUT_S)(
                lambda tx: _data(tx, _COUNT_RETRIEVALS, {"rows": rows, "groups": groups})))
            self._own_counts_written(got[0]["vers"], got[0]["counts"], sent)
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, nx.IncompleteCommit):
                for key, n in pending.items():
                    self._retrievals[key] = self._retrievals.get(key, 0) + n
            raise
        finally:
            answered.set()
            for g in groups:
                if self._counting.get(g) is answered:
                    del self._counting[g]

    def _own_counts_written(self, vers: list[dict[str, Any]], counts: list[dict[str, Any]], sent: float) -> None:
        """Counts this process just wrote go into its mirrors directly when they were current before the write.

        A mirror at version v-1 of a group this write took to v lacks exactly this write (versions follow
        commit order), so applying the stored counts brings it to v without a catch-up read; and every write
        committed before `sent` is at most v, so a confirmation from then stays true. Any other mirror (behind,
        or another epoch) is marked unconfirmed, as after any write.
        """
        if self._mirrors is None:
            return
        by_group: dict[str, list[tuple[str, int]]] = {}
        for c in counts:
            by_group.setdefault(c["g"], []).append((c["id"], int(c["n"])))
        for x in vers:
            mirror = self._mirrors.peek(x["g"])
            if mirror is not None and mirror.epoch == x["e"] and mirror.version == int(x["v"]) - 1:
                mirror.facts.set_retrievals(by_group.get(x["g"], ()))
                mirror.version = int(x["v"])
            else:
                self._mirrors.stale(x["g"], sent)

    def _with_pending(self, group_id: str, facts: list[Fact]) -> list[Fact]:
        """Retrievals not yet written still count: reads in this process see their own increments."""
        pending = self._retrievals
        if not pending:
            return facts
        return [f if (group_id, f.id) not in pending
                else replace(f, retrieval_count=f.retrieval_count + pending[(group_id, f.id)]) for f in facts]

    async def count_facts(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._q("MATCH ()-[r:FACT]->() RETURN count(r) AS c")
        else:
            rows = await self._q("MATCH ()-[r:FACT {group_id: $g}]->() RETURN count(r) AS c", g=group_id)
        return int(rows[0]["c"])


    async def bulk_load(
        self, entities: Sequence[tuple[Entity, Vector | None]], facts: Sequence[tuple[Fact, Vector | None]],
        batch: int = 2000,
    ) -> None:
        """Load pre-resolved rows in UNWIND batches, bypassing resolution: for benchmarks and imports only.

        Rows become parameters one batch at a time: as Python float lists the embeddings of
        100k facts take over a gigabyte. Batches of a few thousand also leave the vector
        indexes fewer Lucene segments to search than many small commits would.
        """
        for i in range(0, len(entities), batch):
            rows = [{k: v for k, v in _entity_params(e, vec).items() if v is not None}
                    for e, vec in entities[i : i + batch]]
            await self._write(lambda tx, rows=rows: _data(
                tx,
                _BUMP + "UNWIND $rows AS p CREATE (e:Entity) SET e = p, e.ver = " + _VER.format("p") + " "
                "WITH e, p UNWIND e.aliases AS key "
                "MERGE (a:Alias {group_id: p.group_id, key: key, type: p.type}) ON CREATE SET a.entity_id = p.id "
                "WITH e, a, p WHERE a.entity_id = p.id MERGE (a)-[:ALIAS_OF]->(e)",
                {"rows": rows, "groups": sorted({r["group_id"] for r in rows})},
            ))
        for i in range(0, len(facts), batch):
            rows = [{k: v for k, v in _fact_params(f, vec).items() if v is not None} for f, vec in facts[i : i + batch]]
            await self._write(lambda tx, rows=rows: _data(
                tx,
                _BUMP + "UNWIND $rows AS p MATCH (s:Entity {id: p.subject_id}), (o:Entity {id: p.object_id}) "
                "CREATE (s)-[r:FACT]->(o) SET r = p, r.ver = " + _VER.format("p"),
                {"rows": rows, "groups": sorted({r["group_id"] for r in rows})},
            ))
        self._mark_written({e.group_id for e, _ in entities} | {f.group_id for f, _ in facts})
        await self._drv().execute_query("CALL db.awaitIndexes(600)", database_=self.database)

    # -- export (for `mnemobus migrate`) --------------------------------------------------

    async def export_group(self, group_id: GroupId) -> GroupExport:
        """Every row of the group with embeddings and screening flags, for `mnemobus migrate`."""
        await self.flush_retrievals()  # the copy carries every count
        eps = await self._q(
            "MATCH (n:Episode {group_id: $g}) RETURN n {.*} AS n ORDER BY n.reference_time, n.id", g=group_id
        )
        ents = await self._q("MATCH (n:Entity {group_id: $g}) RETURN n {.*} AS n ORDER BY n.id", g=group_id)
        facts = await self._q(
            "MATCH (s:Entity)-[r:FACT {group_id: $g}]->(o:Entity) RETURN r {.*} AS r, s.name AS sn, o.name AS on "
            "ORDER BY r.created_at, r.id",
            g=group_id,
        )
        links = await self._q(
            "MATCH (ep:Episode {group_id: $g})-[:MENTIONS]->(e:Entity {group_id: $g}) RETURN ep.id AS ep, e.id AS e",
            g=group_id,
        )

        def v(x: Any) -> Vector | None:
            return None if x is None else np.asarray(x, dtype=np.float32)

        return GroupExport(
            group_id=group_id,
            episodes=[(_episode(r["n"]), bool(r["n"].get("screened")), v(r["n"].get("embedding"))) for r in eps],
            entities=[(_entity(r["n"]), v(r["n"].get("embedding"))) for r in ents],
            facts=[(_fact(r["r"], r["sn"], r["on"]), v(r["r"].get("embedding"))) for r in facts],
            mentions=[(r["ep"], r["e"]) for r in links],
        )

    async def group_ids(self) -> list[GroupId]:
        """Every group that has an episode or an entity."""
        rows = await self._q(
            "CALL { MATCH (n:Episode) RETURN DISTINCT n.group_id AS g UNION MATCH (n:Entity) RETURN DISTINCT n.group_id AS g } "
            "RETURN g ORDER BY g"
        )
        return [GroupId(r["g"]) for r in rows]


def _seen_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """An entity row's place in ORDER BY first_seen, id (nulls last, as Neo4j sorts them)."""
    first = _dt(row.get("first_seen"))
    return (first is None, first or _EPOCH, row["id"])


def _lost_a_lock_race(exc: StoreUnavailable) -> bool:
    """The server chose this transaction as the victim of a deadlock: running it again will succeed."""
    cause = exc.__cause__
    return isinstance(cause, nx.TransientError) and "DeadlockDetected" in (cause.code or "")


async def _rows(result: AsyncResult) -> list[dict[str, Any]]:
    """The records as shallow dicts. Why not `Result.data()`: it walks every nested value through isinstance
    checks against abstract classes, ~8 ms a recall at 100k facts; these queries return only maps, lists and
    scalars (never nodes or relationships), which the driver has already decoded into Python objects."""
    return [dict(record) async for record in result]


async def _data(tx: AsyncManagedTransaction, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    result = await tx.run(query, params or {})
    return await _rows(result)



async def _drop_facts(tx: AsyncManagedTransaction, group_id: str, fact_ids: list[str]) -> int:
    """Delete the group's facts by id; the facts each had superseded are valid again (what ended them is gone)."""
    if not fact_ids:
        return 0
    p = {"g": group_id, "ids": fact_ids}
    await _data(tx, "UNWIND $ids AS fid MATCH ()-[x:FACT {group_id: $g}]->() WHERE x.superseded_by = fid "
                    "SET x.invalid_at = null, x.expired_at = null, x.superseded_by = null", p)
    gone = await _data(tx, "UNWIND $ids AS fid MATCH ()-[r:FACT {id: fid, group_id: $g}]->() DELETE r "
                           "RETURN count(*) AS c", p)
    return int(gone[0]["c"]) if gone else 0
