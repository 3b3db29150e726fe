"""How rows of the SQLite file read back as the store's data, and the column lists the queries share."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mnemobus.shared.groups import GroupId
from mnemobus.store.fact_graph import EPOCH as _EPOCH
from mnemobus.store.fact_graph import utc_from_seconds as _dt
from mnemobus.store.model import Entity, Episode, Fact, Said, Vector

SEP = "\x1f"

VALID_AT = "(f.valid_at IS NULL OR f.valid_at <= :t) AND (f.invalid_at IS NULL OR f.invalid_at > :t)"

FACT_COLUMNS = """
f.id, f.group_id, f.subject_id, f.object_id, s.name, o.name, f.relation, f.edge_type, f.fact,
f.confidence, f.valid_at, f.invalid_at, f.created_at, f.expired_at, f.superseded_by, f.last_seen,
f.retrieval_count,
(SELECT group_concat(episode_id, char(31)) FROM fact_sources fs WHERE fs.fact_id = f.id),
(SELECT group_concat(source_message_id, char(31)) FROM fact_sources fs WHERE fs.fact_id = f.id),
f.qualifier
"""
FACT_FROM = "facts f JOIN entities s ON s.id = f.subject_id JOIN entities o ON o.id = f.object_id"

EPISODE_COLUMNS = (
    "id, group_id, content, role, source_message_id, reference_time, response, agent_id, platform,"
    " channel_id, created_at, speaker, name"
)


def to_seconds(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def to_blob(vector: Vector | None) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


def split_ids(value: str | None) -> tuple[str, ...]:
    return tuple(value.split(SEP)) if value else ()


def fact_of(row: Sequence[Any], pending: dict[str, int] | None = None) -> Fact:
    return Fact(
        id=row[0],
        group_id=GroupId(row[1]),
        subject_id=row[2],
        object_id=row[3],
        subject_name=row[4],
        object_name=row[5],
        relation=row[6],
        edge_type=row[7],
        fact=row[8],
        confidence=row[9],
        valid_at=_dt(row[10]),
        invalid_at=_dt(row[11]),
        created_at=_dt(row[12]) or _EPOCH,
        expired_at=_dt(row[13]),
        superseded_by=row[14],
        last_seen=_dt(row[15]),
        retrieval_count=row[16] + (pending.get(row[0], 0) if pending else 0),
        episode_ids=split_ids(row[17]),
        source_message_ids=split_ids(row[18]),
        qualifier=row[19],
    )


def episode_of(row: Sequence[Any]) -> Episode:
    return Episode(
        id=row[0],
        group_id=GroupId(row[1]),
        content=row[2],
        role=row[3],
        source_message_id=row[4],
        reference_time=_dt(row[5]),  # type: ignore[arg-type]
        response=row[6],
        agent_id=row[7],
        platform=row[8],
        channel_id=row[9],
        created_at=_dt(row[10]),
        speaker=row[11],
        name=row[12],
    )


def said_of(row: Sequence[Any]) -> Said:
    """A row of EPISODE_COLUMNS as recall ranks it; the whole Episode built from it only when asked."""
    return Said(row[0], row[1], row[2], row[5], functools.partial(episode_of, row))


def entity_of(row: Sequence[Any], aliases: tuple[str, ...]) -> Entity:
    return Entity(
        id=row[0],
        group_id=GroupId(row[1]),
        name=row[2],
        canonical_name=row[3],
        type=row[4],
        aliases=aliases,
        summary=row[5],
        confidence=row[6],
        first_seen=_dt(row[7]),
        last_seen=_dt(row[8]),
    )


def vector_of(blob: bytes | None) -> Vector | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32).copy()


def load_entities(c: sqlite3.Connection, group_id: str, ids: list[str]) -> list[Entity]:
    marks = ",".join("?" * len(ids))
    rows = c.execute(
        "SELECT id, group_id, name, canonical_name, type, summary, confidence, first_seen, last_seen"
        f" FROM entities WHERE +group_id = ? AND id IN ({marks})",
        (group_id, *ids),
    ).fetchall()
    aliases: dict[str, list[str]] = {}
    for eid, alias in c.execute(
        f"SELECT entity_id, alias FROM aliases WHERE +group_id = ? AND entity_id IN ({marks}) ORDER BY alias",
        (group_id, *ids),
    ):
        aliases.setdefault(eid, []).append(alias)
    by_id = {r[0]: entity_of(r, tuple(aliases.get(r[0], ()))) for r in rows}
    return [by_id[i] for i in ids if i in by_id]
