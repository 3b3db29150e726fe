"""Between Neo4j rows and the store's model: ids and times as they travel, parameters for writes, result helpers."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
import numpy as np

from neo4j import AsyncManagedTransaction, AsyncResult

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Vector
from mnemobus.store.model import Entity, Episode, Fact
from mnemobus.store.neo4j.overlay import EPOCH, as_datetime


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


class QuietFloats(list):  # type: ignore[type-arg]
    """A float list whose repr is short. The driver (neo4j 6.4) formats the repr of every parameter of a statement
    for a debug log line whether or not debug logging is on; a 384-float list's repr costs ~0.4 ms, a fifth of
    a worker's CPU per episode. It is packed exactly as a list."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} floats>"


class QuietBytes(bytes):
    """Bytes with a short repr, for the same reason as QuietFloats."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes>"


def as_float_list(v: Vector | Sequence[float] | None) -> list[float] | None:
    if v is None:
        return None
    return QuietFloats(np.asarray(v, dtype=np.float32).astype(float).tolist())


def as_float32_bytes(v: Vector | Sequence[float] | None) -> bytes | None:
    """The embedding as little-endian float32 bytes: the `emb32` copy beside the float list the vector index
    reads, so a mirror loads a row's embedding as one buffer (see mirror.as_vector)."""
    if v is None:
        return None
    return QuietBytes(np.asarray(v, dtype="<f4").tobytes())


_dt = as_datetime


def utc_or_none(v: datetime | None) -> datetime | None:
    """Datetimes go to Neo4j as zoned DateTime; naive ones are taken as UTC (the contract's convention)."""
    if v is None:
        return None
    return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)


def epoch_us(v: datetime) -> int:
    """Microseconds since the epoch: how the mirrors hold times (as the server's projections return them)."""
    return (utc_or_none(v) - EPOCH) // timedelta(microseconds=1)  # type: ignore[operator]


def cosine_score(score: float) -> float:
    """Neo4j reports cosine rescaled to (1+cos)/2; the contract speaks plain cosine."""
    return 2.0 * float(score) - 1.0


def episode_from_row(n: dict[str, Any]) -> Episode:
    return Episode(
        id=n["id"],
        group_id=GroupId(n["group_id"]),
        content=n["content"],
        role=n["role"],
        source_message_id=n["source_message_id"],
        reference_time=as_datetime(n["reference_time"]),  # type: ignore[arg-type]
        response=n.get("response"),
        agent_id=n.get("agent_id"),
        platform=n.get("platform"),
        channel_id=n.get("channel_id"),
        created_at=as_datetime(n.get("created_at")),
        speaker=n.get("speaker"),
        name=n.get("name"),
    )


def entity_from_row(n: dict[str, Any]) -> Entity:
    return Entity(
        id=n["id"],
        group_id=GroupId(n["group_id"]),
        name=n["name"],
        canonical_name=n["canonical_name"],
        type=n.get("type") or "thing",
        aliases=tuple(sorted(n.get("aliases") or ())),
        summary=n.get("summary") or "",
        confidence=float(n.get("confidence", 1.0)),
        first_seen=as_datetime(n.get("first_seen")),
        last_seen=as_datetime(n.get("last_seen")),
    )


def fact_from_row(r: dict[str, Any], subject_name: str | None = None, object_name: str | None = None) -> Fact:
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
        valid_at=as_datetime(r.get("valid_at")),
        invalid_at=as_datetime(r.get("invalid_at")),
        created_at=as_datetime(r["created_at"]),  # type: ignore[arg-type]
        expired_at=as_datetime(r.get("expired_at")),
        superseded_by=r.get("superseded_by"),
        last_seen=as_datetime(r.get("last_seen")),
        episode_ids=tuple(e for e, _ in prov),
        source_message_ids=tuple(m for _, m in prov),
        retrieval_count=int(r.get("retrieval_count") or 0),
        qualifier=r.get("qualifier"),
    )



def episode_params(e: Episode, screened: bool, embedding: Vector | None) -> dict[str, Any]:
    return {
        "id": e.id, "group_id": e.group_id, "gk": group_key(e.group_id), "content": e.content, "role": e.role,
        "source_message_id": e.source_message_id, "reference_time": utc_or_none(e.reference_time),
        "response": e.response, "agent_id": e.agent_id, "platform": e.platform, "channel_id": e.channel_id,
        "created_at": utc_or_none(e.created_at) or datetime.now(UTC), "screened": bool(screened),
        "embedding": as_float_list(embedding), "emb32": as_float32_bytes(embedding), "speaker": e.speaker, "name": e.name,
    }


def fact_params(f: Fact, embedding: Vector | None) -> dict[str, Any]:
    return {
        "id": f.id, "group_id": f.group_id, "gk": group_key(f.group_id), "subject_id": f.subject_id,
        "object_id": f.object_id, "subject_name": f.subject_name, "object_name": f.object_name,
        "relation": f.relation, "relation_text": f.relation.replace("_", " "), "edge_type": f.edge_type, "fact": f.fact, "confidence": float(f.confidence),
        "valid_at": utc_or_none(f.valid_at), "invalid_at": utc_or_none(f.invalid_at), "created_at": utc_or_none(f.created_at),
        "expired_at": utc_or_none(f.expired_at), "superseded_by": f.superseded_by, "last_seen": utc_or_none(f.last_seen),
        "episode_ids": list(f.episode_ids), "source_message_ids": list(f.source_message_ids),
        "retrieval_count": int(f.retrieval_count), "embedding": as_float_list(embedding), "emb32": as_float32_bytes(embedding),
        "qualifier": f.qualifier,
    }


def entity_params(e: Entity, embedding: Vector | None) -> dict[str, Any]:
    return {
        "id": e.id, "group_id": e.group_id, "gk": group_key(e.group_id), "name": e.name,
        "canonical_name": e.canonical_name, "type": e.type, "aliases": sorted({e.canonical_name, *e.aliases}),
        "alias_text": " ".join(sorted({e.canonical_name, *e.aliases})), "summary": e.summary, "confidence": float(e.confidence),
        "first_seen": utc_or_none(e.first_seen), "last_seen": utc_or_none(e.last_seen), "embedding": as_float_list(embedding),
        "emb32": as_float32_bytes(embedding),
    }


# The version of each written group goes up by one per statement that writes it, and the rows
# (episodes, entities, facts) carry the new version as `ver`: see mirror.py. The version
# node also serialises a group's writers (its lock is held to commit), so versions follow commit
def seen_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """An entity row's place in ORDER BY first_seen, id (nulls last, as Neo4j sorts them)."""
    first = as_datetime(row.get("first_seen"))
    return (first is None, first or EPOCH, row["id"])


async def record_dicts(result: AsyncResult) -> list[dict[str, Any]]:
    """The records as shallow dicts. Why not `Result.data()`: it walks every nested value through isinstance
    checks against abstract classes, ~8 ms a recall at 100k facts; these queries return only maps, lists and
    scalars (never nodes or relationships), which the driver has already decoded into Python objects."""
    return [dict(record) async for record in result]


async def run_rows(tx: AsyncManagedTransaction, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    result = await tx.run(query, params or {})
    return await record_dicts(result)



async def drop_facts(tx: AsyncManagedTransaction, group_id: str, fact_ids: list[str]) -> int:
    """Delete the group's facts by id; the facts each had superseded are valid again (what ended them is gone)."""
    if not fact_ids:
        return 0
    p = {"g": group_id, "ids": fact_ids}
    await run_rows(tx, "UNWIND $ids AS fid MATCH ()-[x:FACT {group_id: $g}]->() WHERE x.superseded_by = fid "
                    "SET x.invalid_at = null, x.expired_at = null, x.superseded_by = null", p)
    gone = await run_rows(tx, "UNWIND $ids AS fid MATCH ()-[r:FACT {id: fid, group_id: $g}]->() DELETE r "
                           "RETURN count(*) AS c", p)
    return int(gone[0]["c"]) if gone else 0


def lucene_phrase(text: str) -> str:
    """Text as one quoted Lucene phrase; user text can never become query syntax."""
    return '"' + _LUCENE_SPECIAL.sub(r"\\\1", text.strip()) + '"'
