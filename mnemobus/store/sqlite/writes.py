"""Writing: the store's WriteTxn and the row-level steps (insert, drop, delete) its transactions share."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

from mnemobus.shared.errors import StoreIntegrityError, episode_id_taken
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import DeleteCounts, Vector, held_since, pick_by_type
from mnemobus.store.model import Entity, Episode, Fact
from mnemobus.store.sqlite.erasures import check_not_erased
from mnemobus.store.sqlite.fts import group_token, terms_match
from mnemobus.store.sqlite.rows import (EPISODE_COLUMNS, FACT_COLUMNS, FACT_FROM, fact_of, load_entities, to_blob,
                                        to_seconds)
from mnemobus.store.sqlite.vectors import VectorCache

T = TypeVar("T")


def drop_facts(c: sqlite3.Connection, group_id: str, fact_ids: Sequence[str], *, revive: bool = True) -> int:
    """Delete the group's facts by id with their provenance; with `revive`, the facts each had superseded are
    valid again (what ended them is gone: a delete, not an eviction). Returns how many there were."""
    dropped = 0
    for fid in fact_ids:
        if revive:
            c.execute(
                "UPDATE facts SET invalid_at = NULL, expired_at = NULL, superseded_by = NULL"
                " WHERE superseded_by = ? AND group_id = ?", (fid, group_id),
            )
        c.execute("DELETE FROM facts_fts WHERE rowid = (SELECT rowid FROM facts WHERE id = ? AND group_id = ?)",
                  (fid, group_id))
        if c.execute("DELETE FROM facts WHERE id = ? AND group_id = ?", (fid, group_id)).rowcount:
            c.execute("DELETE FROM fact_sources WHERE fact_id = ?", (fid,))
            dropped += 1
    return dropped


def delete_episode_rows(c: sqlite3.Connection, group_id: str, episode_id: str) -> DeleteCounts:
    row = c.execute("SELECT rowid FROM episodes WHERE id = ? AND group_id = ?", (episode_id, group_id)).fetchone()
    if row is None:
        return DeleteCounts()
    sourced = [fid for (fid,) in c.execute(
        "SELECT fs.fact_id FROM fact_sources fs JOIN facts f ON f.id = fs.fact_id"
        " WHERE fs.episode_id = ? AND f.group_id = ?", (episode_id, group_id))]
    c.execute("DELETE FROM fact_sources WHERE episode_id = ?", (episode_id,))
    orphans = [fid for fid in sourced
               if c.execute("SELECT 1 FROM fact_sources WHERE fact_id = ? LIMIT 1", (fid,)).fetchone() is None]
    drop_facts(c, group_id, orphans)
    mentioned = [eid for (eid,) in c.execute("SELECT entity_id FROM episode_entities WHERE episode_id = ?", (episode_id,))]
    c.execute("DELETE FROM episode_entities WHERE episode_id = ?", (episode_id,))
    entities = 0
    for eid in mentioned:
        still_used = c.execute(
            "SELECT 1 FROM episode_entities WHERE entity_id = ? UNION ALL SELECT 1 FROM facts WHERE subject_id = ?"
            " UNION ALL SELECT 1 FROM facts WHERE object_id = ? LIMIT 1", (eid, eid, eid),
        ).fetchone()
        if still_used is None:
            c.execute("DELETE FROM aliases WHERE group_id = ? AND entity_id = ?", (group_id, eid))
            c.execute("DELETE FROM entities_fts WHERE rowid = (SELECT rowid FROM entities WHERE id = ?)", (eid,))
            entities += c.execute("DELETE FROM entities WHERE id = ? AND group_id = ?", (eid, group_id)).rowcount
    c.execute("DELETE FROM episodes_fts WHERE rowid = ?", (row[0],))
    c.execute("DELETE FROM episodes WHERE rowid = ?", (row[0],))
    return DeleteCounts(episodes=1, entities=entities, facts=len(orphans))


def entity_fts_body(c: sqlite3.Connection, group_id: str, entity_id: str, name: str) -> str:
    aliases = [a for (a,) in c.execute("SELECT alias FROM aliases WHERE group_id = ? AND entity_id = ?", (group_id, entity_id))]
    return " ".join(dict.fromkeys([name, *aliases]))


def insert_entity_row(c: sqlite3.Connection, e: Entity, vec: Vector | None) -> None:
    if c.execute("SELECT 1 FROM entities WHERE id = ?", (e.id,)).fetchone() is not None:
        raise StoreIntegrityError(f"entity {e.id} is already stored")
    cur = c.execute(
        "INSERT INTO entities(id, group_id, name, canonical_name, type, summary, confidence, first_seen, last_seen,"
        " embedding) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (e.id, e.group_id, e.name, e.canonical_name, e.type, e.summary, e.confidence, to_seconds(e.first_seen),
         to_seconds(e.last_seen), to_blob(vec)),
    )
    rowid = cur.lastrowid
    for alias in dict.fromkeys((e.canonical_name, *e.aliases)):
        c.execute("INSERT OR IGNORE INTO aliases(group_id, alias, type, entity_id) VALUES (?,?,?,?)",
                  (e.group_id, alias, e.type, e.id))
    c.execute(
        "INSERT INTO entities_fts(rowid, gtok, body) VALUES (?,?,?)",
        (rowid, group_token(e.group_id), entity_fts_body(c, e.group_id, e.id, e.name)),
    )


def insert_fact_row(c: sqlite3.Connection, f: Fact, vec: Vector | None) -> None:
    if c.execute("SELECT 1 FROM facts WHERE id = ?", (f.id,)).fetchone() is not None:
        raise StoreIntegrityError(f"fact {f.id} is already stored")
    cur = c.execute(
        "INSERT INTO facts(id, group_id, subject_id, object_id, relation, edge_type, fact, confidence, valid_at,"
        " invalid_at, created_at, expired_at, superseded_by, last_seen, retrieval_count, embedding, qualifier)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (f.id, f.group_id, f.subject_id, f.object_id, f.relation, f.edge_type, f.fact, f.confidence,
         to_seconds(f.valid_at), to_seconds(f.invalid_at), to_seconds(f.created_at), to_seconds(f.expired_at), f.superseded_by,
         to_seconds(f.last_seen), f.retrieval_count, to_blob(vec), f.qualifier),
    )
    body = f"{f.fact} {f.subject_name} {f.relation.replace('_', ' ')} {f.object_name}"
    c.execute("INSERT INTO facts_fts(rowid, gtok, body) VALUES (?,?,?)", (cur.lastrowid, group_token(f.group_id), body))
    for episode_id, message_id in zip(f.episode_ids, f.source_message_ids, strict=False):
        c.execute(
            "INSERT OR IGNORE INTO fact_sources(fact_id, episode_id, source_message_id) VALUES (?,?,?)",
            (f.id, episode_id, message_id),
        )


class SqliteTxn:
    """The WriteTxn of SqliteStore: every call runs on the writer connection inside BEGIN IMMEDIATE.

    Inline transactions (from `run_transactions`) already run on a worker
    thread and call SQLite directly; the others hop to a thread per call.
    """

    def __init__(self, run: Callable[[Callable[[], Any]], Awaitable[Any]], vectors: VectorCache,
                 conn: sqlite3.Connection, *, inline: bool = False) -> None:
        self._run = run  # the store's hop to its writer thread
        self._vectors = vectors
        self._c = conn
        self._inline = inline
        self.groups: set[str] = set()

    async def _do(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._inline:
            return fn(self._c)
        return await self._run(lambda: fn(self._c))

    async def check_not_erased(self, group_id: GroupId, seen: int) -> None:
        await self._do(lambda c: check_not_erased(c, group_id, seen))

    async def insert_episode(self, episode: Episode, *, screened: bool, embedding: Vector | None) -> bool:
        e = episode

        def w(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                f"INSERT OR IGNORE INTO episodes({EPISODE_COLUMNS}, screened, embedding)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (e.id, e.group_id, e.content, e.role, e.source_message_id, to_seconds(e.reference_time), e.response,
                 e.agent_id, e.platform, e.channel_id, to_seconds(e.created_at or datetime.now(UTC)), e.speaker, e.name,
                 int(screened),
                 None if screened else to_blob(embedding)),
            )
            if cur.rowcount == 0:
                owner = c.execute("SELECT group_id FROM episodes WHERE id = ?", (e.id,)).fetchone()[0]
                if owner != e.group_id:
                    raise episode_id_taken(e.id, e.group_id, owner)
                return False
            if screened:  # kept for audit, never searchable: it must not reach a prompt as memory
                return True
            body = e.content if not e.response else f"{e.content}\n{e.response}"
            c.execute(
                "INSERT INTO episodes_fts(rowid, gtok, body) VALUES (?,?,?)",
                (cur.lastrowid, group_token(e.group_id), body),
            )
            return True

        return await self._do(w)

    async def entity_by_alias(self, group_id: GroupId, alias: str, types: Sequence[str] | None = None) -> Entity | None:
        def r(c: sqlite3.Connection) -> Entity | None:
            rows = [(t, eid) for t, eid in c.execute(
                "SELECT a.type, a.entity_id FROM aliases a JOIN entities e ON e.id = a.entity_id"
                " WHERE a.group_id = ? AND a.alias = ? ORDER BY e.first_seen, e.id", (group_id, alias))
                if types is None or t in types]
            if not rows:
                return None
            found = load_entities(c, group_id, [pick_by_type(rows, types)])
            return found[0] if found else None

        return await self._do(r)

    async def similar_entities(self, group_id: GroupId, vector: Vector, k: int, *,
                               min_similarity: float | None = None) -> list[tuple[Entity, float]]:
        self.groups.add(group_id)

        def r(c: sqlite3.Connection) -> list[tuple[Entity, float]]:
            hits = [h for h in self._vectors.search(c, "entities", group_id, np.asarray(vector), k)
                    if min_similarity is None or h[1] >= min_similarity]
            entities = {e.id: e for e in load_entities(c, group_id, [h[0] for h in hits])} if hits else {}
            return [(entities[i], s) for i, s in hits if i in entities]

        return await self._do(r)

    async def insert_entity(self, entity: Entity, embedding: Vector | None) -> None:
        await self._do(lambda c: insert_entity_row(c, entity, embedding))

    async def observe_entity(self, group_id: GroupId, entity_id: str, *, name: str, alias: str, seen: datetime) -> None:
        t = to_seconds(seen)

        def w(c: sqlite3.Connection) -> None:
            row = c.execute("SELECT rowid FROM entities WHERE id = ? AND group_id = ?", (entity_id, group_id)).fetchone()
            if row is None:
                raise StoreIntegrityError(f"entity {entity_id} is not in group {group_id}")
            c.execute(
                "UPDATE entities SET name = ?, last_seen = max(coalesce(last_seen, ?), ?),"
                " first_seen = min(coalesce(first_seen, ?), ?) WHERE id = ?",
                (name, t, t, t, t, entity_id),
            )
            c.execute("INSERT OR IGNORE INTO aliases(group_id, alias, type, entity_id)"
                      " SELECT ?, ?, type, id FROM entities WHERE id = ?", (group_id, alias, entity_id))
            c.execute("DELETE FROM entities_fts WHERE rowid = ?", (row[0],))
            c.execute(
                "INSERT INTO entities_fts(rowid, gtok, body) VALUES (?,?,?)",
                (row[0], group_token(group_id), entity_fts_body(c, group_id, entity_id, name)),
            )

        await self._do(w)

    async def link_episode_entity(self, group_id: GroupId, episode_id: str, entity_id: str) -> None:
        await self._do(
            lambda c: c.execute(
                # only an episode of the group: a link to a turn whose write failed would be an orphan row
                "INSERT OR IGNORE INTO episode_entities(episode_id, entity_id) SELECT ?, ? WHERE EXISTS "
                "(SELECT 1 FROM episodes WHERE id = ? AND group_id = ?)", (episode_id, entity_id, episode_id, group_id)
            )
        )

    async def episodes_saying(self, group_id: GroupId, name: str, limit: int) -> list[tuple[str, str]]:
        match = terms_match([name])
        if match is None or limit <= 0:
            return []
        # the name's rows over every group, then the group's on the join: a name's rows are few, while matching
        # the group token inside FTS5 would walk the group's whole doclist (fts.py)
        return await self._do(lambda c: [(i, body) for i, body in c.execute(
            "SELECT x.id, x.content FROM episodes_fts JOIN episodes x ON x.rowid = episodes_fts.rowid"
            " WHERE episodes_fts MATCH ? AND x.group_id = ? ORDER BY x.reference_time DESC, x.id LIMIT ?",
            (match, group_id, limit))])

    async def facts_between(self, group_id: GroupId, subject_id: str, relation: str, *,
                            objects: Sequence[str] | None = None, held_after: datetime | None = None) -> list[Fact]:
        # narrowed in SQL, as `in_narrowed_chain` says: the rows left out are never built (nor their sources read)
        where, params = "", []
        if objects is not None or held_after is not None:
            named = list(dict.fromkeys(objects or ()))
            kept = [f"f.object_id IN ({','.join('?' * len(named))})"] if named else []
            params += named
            if held_after is not None:
                since = to_seconds(held_since(held_after))
                kept.append("f.invalid_at IS NULL OR f.invalid_at >= ? OR f.valid_at >= ?")
                params += [since, since]
            where = f" AND ({' OR '.join(kept) or '0'})"

        def r(c: sqlite3.Connection) -> list[Fact]:
            rows = c.execute(
                f"SELECT {FACT_COLUMNS} FROM {FACT_FROM} WHERE +f.group_id = ? AND f.subject_id = ? AND f.relation = ?"
                f"{where} ORDER BY coalesce(f.valid_at, -1e18), f.created_at, f.id",
                (group_id, subject_id, relation, *params),
            ).fetchall()
            return [fact_of(x) for x in rows]

        return await self._do(r)

    async def insert_fact(self, fact: Fact, embedding: Vector | None) -> None:
        def w(c: sqlite3.Connection) -> None:
            found = c.execute(
                "SELECT count(*) FROM entities WHERE +group_id = ? AND id IN (?, ?)",
                (fact.group_id, fact.subject_id, fact.object_id),
            ).fetchone()[0]
            if found != len({fact.subject_id, fact.object_id}):
                raise StoreIntegrityError(f"fact {fact.id} names an entity that is not in group {fact.group_id}")
            insert_fact_row(c, fact, embedding)

        await self._do(w)

    async def update_fact(self, fact: Fact) -> None:
        f = fact

        def w(c: sqlite3.Connection) -> None:
            cur = c.execute(
                "UPDATE facts SET confidence = ?, last_seen = ?, valid_at = ?, invalid_at = ?, expired_at = ?,"
                " superseded_by = ? WHERE id = ? AND group_id = ?",
                (f.confidence, to_seconds(f.last_seen), to_seconds(f.valid_at), to_seconds(f.invalid_at), to_seconds(f.expired_at),
                 f.superseded_by, f.id, f.group_id),
            )
            if cur.rowcount != 1:
                raise StoreIntegrityError(f"fact {f.id} is not in group {f.group_id}")

        await self._do(w)

    async def add_fact_source(self, group_id: GroupId, fact_id: str, episode_id: str, source_message_id: str) -> None:
        await self._do(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO fact_sources(fact_id, episode_id, source_message_id) VALUES (?,?,?)",
                (fact_id, episode_id, source_message_id),
            )
        )
