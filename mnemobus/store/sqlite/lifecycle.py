"""SQLite's part of a group's life-cycle (`store.lifecycle.Lifecycle`): eviction, decay, promoted memories.

A mixin of `SqliteStore`, kept here so the store module only gains a base class. Eviction runs as one
transaction on the writer connection; a dry run is the same transaction rolled back, so its counts are exactly
what a real run would remove. The fact graphs follow by themselves: the delete trigger moves the group's epoch
(graph.py), and the vector cache of an evicted group is dropped as after any deletion.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from mnemobus.shared.groups import GroupId
from mnemobus.store.fact_graph import utc_from_seconds
from mnemobus.store.lifecycle import (Eviction, Promoted, PromotedReads, RetentionPolicy, evict_in_chunks,
                                      in_sessions)
from mnemobus.store.sqlite.group_state import GroupState
from mnemobus.store.sqlite.rows import to_seconds
from mnemobus.store.sqlite.tx import immediate
from mnemobus.store.sqlite.writes import drop_facts

T = TypeVar("T")

LIFECYCLE_SCHEMA = """
CREATE TABLE IF NOT EXISTS evictions(
  group_id TEXT PRIMARY KEY, facts INTEGER NOT NULL DEFAULT 0, entities INTEGER NOT NULL DEFAULT 0,
  cutoff REAL, decayed_at REAL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS promoted(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, kind TEXT NOT NULL, scope TEXT NOT NULL, text TEXT NOT NULL,
  author TEXT NOT NULL, created_at REAL NOT NULL, session TEXT);
CREATE INDEX IF NOT EXISTS promoted_group ON promoted(group_id, created_at);
"""
_ACTIVE = "(f.invalid_at IS NULL OR f.invalid_at > :now)"


def add_lifecycle(conn: sqlite3.Connection) -> None:
    """Schema 7: per-group eviction totals and cutoff, and promoted memories (idempotent)."""
    conn.executescript(LIFECYCLE_SCHEMA)


def _remove_entities(c: sqlite3.Connection, group_id: str, entity_ids: Sequence[str]) -> int:
    gone = 0
    for eid in entity_ids:
        c.execute("DELETE FROM aliases WHERE group_id = ? AND entity_id = ?", (group_id, eid))
        c.execute("DELETE FROM entities_fts WHERE rowid = (SELECT rowid FROM entities WHERE id = ? AND group_id = ?)",
                  (eid, group_id))
        c.execute("DELETE FROM episode_entities WHERE entity_id = ?", (eid,))
        gone += c.execute("DELETE FROM entities WHERE id = ? AND group_id = ?", (eid, group_id)).rowcount
    return gone


def _facts_naming(c: sqlite3.Connection, group_id: str, entity_ids: Sequence[str]) -> list[tuple[str, float | None]]:
    out: dict[str, float | None] = {}
    for eid in entity_ids:
        for fid, ended in c.execute("SELECT id, invalid_at FROM facts WHERE +group_id = ? AND subject_id = ?"
                                    " UNION SELECT id, invalid_at FROM facts WHERE +group_id = ? AND object_id = ?",
                                    (group_id, eid, group_id, eid)):
            out[fid] = ended
    return list(out.items())


def evict_rows(c: sqlite3.Connection, group_id: str, policy: RetentionPolicy, now: datetime,
               limit: int | None = None) -> Eviction:
    """The three rules of `Lifecycle.evict` inside the caller's transaction (at most `limit` ended facts by
    rule 1); the totals row updated."""
    now_s = to_seconds(now)
    p: dict[str, Any] = {"g": group_id, "now": now_s}
    doomed: dict[str, float] = {}  # fact id -> what it takes from the past: its end, or now when it still held
    entities: list[str] = []
    if (ended := policy.ended_before(now)) is not None:
        doomed.update(c.execute("SELECT id, invalid_at FROM facts WHERE group_id = :g AND invalid_at IS NOT NULL"
                                " AND invalid_at < :before LIMIT :n", {**p, "before": to_seconds(ended), "n": -1 if limit is None else limit}).fetchall())
    if (unseen := policy.unseen_before(now)) is not None:
        orphans = [eid for (eid,) in c.execute(
            "SELECT e.id FROM entities e WHERE e.group_id = :g AND coalesce(e.last_seen, e.first_seen, 0) < :before"
            f" AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.subject_id = e.id AND {_ACTIVE})"
            f" AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.object_id = e.id AND {_ACTIVE})",
            {**p, "before": to_seconds(unseen)})]
        entities.extend(orphans)
        doomed.update((fid, ended_s) for fid, ended_s in _facts_naming(c, group_id, orphans) if fid not in doomed)
    if policy.entity_cap is not None:
        held = c.execute("SELECT count(*) FROM entities WHERE group_id = ?", (group_id,)).fetchone()[0] - len(entities)
        if held > policy.entity_cap:
            taken = set(entities)
            ranked = c.execute(
                "SELECT e.id FROM entities e WHERE e.group_id = :g ORDER BY"
                " (SELECT count(*) FROM facts f WHERE f.subject_id = e.id)"
                " + (SELECT count(*) FROM facts f WHERE f.object_id = e.id),"
                " coalesce(e.last_seen, e.first_seen, 0), e.id", p).fetchall()
            least = [eid for (eid,) in ranked if eid not in taken][:held - policy.entity_cap]
            entities.extend(least)
            for fid, ended_s in _facts_naming(c, group_id, least):
                if fid not in doomed:
                    doomed[fid] = ended_s if ended_s is not None and ended_s <= now_s else now_s
    facts = drop_facts(c, group_id, list(doomed), revive=False)  # what they superseded stays ended
    removed = _remove_entities(c, group_id, entities)
    cutoff_s = max(doomed.values(), default=None)
    if facts or removed:
        c.execute("INSERT INTO evictions(group_id, facts, entities, cutoff) VALUES (?, ?, ?, ?)"
                  " ON CONFLICT(group_id) DO UPDATE SET facts = facts + excluded.facts,"
                  " entities = entities + excluded.entities,"
                  " cutoff = max(coalesce(cutoff, excluded.cutoff), coalesce(excluded.cutoff, cutoff))",
                  (group_id, facts, removed, cutoff_s))
    return Eviction(facts=facts, entities=removed, cutoff=utc_from_seconds(cutoff_s) if cutoff_s is not None else None)


def _promoted_of(row: Sequence[Any]) -> Promoted:
    return Promoted(id=row[0], group_id=GroupId(row[1]), kind=row[2], scope=row[3], text=row[4], author=row[5],
                    created_at=utc_from_seconds(row[6]), session=row[7])


class SqliteLifecycle(PromotedReads):
    """`Lifecycle` over the store's connections; every method runs in one worker-thread hop."""

    vectors: Any
    _write_lock: anyio.Lock
    _local: threading.local

    if TYPE_CHECKING:  # provided by SqliteStore
        def _state(self, c: sqlite3.Connection, group_id: str) -> GroupState | None: ...
        async def _run(self, fn: Callable[[], T]) -> T: ...
        async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...
        def _writer_conn(self) -> sqlite3.Connection: ...
        def _flush_retrievals_in(self, conn: sqlite3.Connection) -> dict[str, int]: ...

    async def _write_lifecycle(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def work() -> T:
            with immediate(self._writer_conn()) as c:
                return fn(c)

        async with self._write_lock:
            return await self._run(work)

    async def evict(self, group_id: GroupId, policy: RetentionPolicy, *, now: datetime,
                    dry_run: bool = False) -> Eviction:
        """A dry run is the real transaction rolled back: its counts are what a real run removes."""

        def once(rules: RetentionPolicy, limit: int | None) -> Eviction:
            c = self._writer_conn()
            c.execute("BEGIN IMMEDIATE")
            try:
                found = evict_rows(c, group_id, rules, now, limit)
            except BaseException:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise
            c.execute("ROLLBACK" if dry_run else "COMMIT")
            return found

        async def run(rules: RetentionPolicy, limit: int | None) -> Eviction:
            async with self._write_lock:
                return await self._run(lambda: once(rules, limit))

        found = await run(policy, None) if dry_run else await evict_in_chunks(run, policy)
        if not dry_run and not found.empty:
            self.vectors.drop_group(group_id)  # cached matrices would still hold the evicted rows
        return found

    async def evicted_so_far(self, group_id: GroupId) -> Eviction:
        def q(c: sqlite3.Connection) -> Eviction:
            row = c.execute("SELECT facts, entities, cutoff FROM evictions WHERE group_id = ?", (group_id,)).fetchone()
            if row is None:
                return Eviction()
            return Eviction(facts=row[0], entities=row[1], cutoff=utc_from_seconds(row[2]) if row[2] is not None else None)

        return await self._read(q)

    async def decay_retrievals(self, group_id: GroupId, factor: float, *, min_confidence: float, now: datetime,
                               every: timedelta) -> int | None:
        due = to_seconds(now - every)

        def w(c: sqlite3.Connection) -> int | None:
            last = c.execute("SELECT decayed_at FROM evictions WHERE group_id = ?", (group_id,)).fetchone()
            if last is not None and last[0] is not None and last[0] > due:
                return None  # another worker (or an earlier pass) did this interval's decay
            self._flush_retrievals_in(c)  # counts still held in memory decay with the rest
            stale = "coalesce(last_seen, valid_at, created_at) < :before"
            changed = c.execute(
                f"UPDATE facts SET retrieval_count = CAST(retrieval_count * :f AS INTEGER),"
                f" confidence = CASE WHEN {stale} THEN min(confidence, max(:floor, confidence * :f))"
                f" ELSE confidence END"
                f" WHERE group_id = :g AND (retrieval_count > 0 OR ({stale} AND confidence > :floor))",
                {"g": group_id, "f": factor, "floor": min_confidence, "before": due},
            ).rowcount
            c.execute("INSERT INTO evictions(group_id, decayed_at) VALUES (?, ?)"
                      " ON CONFLICT(group_id) DO UPDATE SET decayed_at = excluded.decayed_at",
                      (group_id, to_seconds(now)))
            return changed

        return await self._write_lifecycle(w)

    async def keep_evictions(self, group_id: GroupId, totals: Eviction) -> None:
        cutoff_s = to_seconds(totals.cutoff) if totals.cutoff is not None else None
        await self._write_lifecycle(lambda c: c.execute(
            "INSERT INTO evictions(group_id, facts, entities, cutoff) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(group_id) DO UPDATE SET facts = max(facts, excluded.facts),"
            " entities = max(entities, excluded.entities),"
            " cutoff = max(coalesce(cutoff, excluded.cutoff), coalesce(excluded.cutoff, cutoff))",
            (group_id, totals.facts, totals.entities, cutoff_s)))

    async def add_promoted(self, memory: Promoted) -> None:
        m = memory
        await self._write_lifecycle(lambda c: c.execute(
            "INSERT OR IGNORE INTO promoted(id, group_id, kind, scope, text, author, created_at, session)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (m.id, m.group_id, m.kind, m.scope, m.text, m.author, to_seconds(m.created_at), m.session)))

    async def promoted_of(self, group_ids: Sequence[GroupId],
                          sessions: Sequence[str | None] | None = None) -> list[Promoted]:
        ids = list(dict.fromkeys(group_ids))
        if not ids:
            return []

        def q(c: sqlite3.Connection) -> list[Promoted]:
            rows = c.execute("SELECT id, group_id, kind, scope, text, author, created_at, session FROM promoted"
                             f" WHERE group_id IN ({','.join('?' * len(ids))}) ORDER BY created_at, id", ids).fetchall()
            return in_sessions([_promoted_of(r) for r in rows], sessions)

        return await self._read(q)

    async def promoted_in_recall(self, group_ids: Sequence[GroupId], sessions: Sequence[str | None] | None,
                                 since: float) -> list[Promoted]:
        """Inside `run_reads` each group's count comes with its state (`group_state.py`), read in the recall's own
        snapshot (so `since` needs no check): a group with none costs nothing more, and the read needs no hop."""
        conn = getattr(self._local, "conn", None)
        if conn is None:  # not inside run_reads: no snapshot's states to go by
            return await self.promoted_of(group_ids, sessions)
        held = [g for g in dict.fromkeys(group_ids) if (st := self._state(conn, g)) is None or st.promoted]
        return await self.promoted_of(held, sessions) if held else []

    async def delete_promoted(self, group_id: GroupId, memory_id: str) -> bool:
        return bool(await self._write_lifecycle(lambda c: c.execute(
            "DELETE FROM promoted WHERE id = ? AND group_id = ?", (memory_id, group_id)).rowcount))


def delete_lifecycle_rows(c: sqlite3.Connection, group_id: str) -> None:
    """A group's erasure takes its promoted memories and eviction totals too."""
    c.execute("DELETE FROM promoted WHERE group_id = ?", (group_id,))
    c.execute("DELETE FROM evictions WHERE group_id = ?", (group_id,))
