"""SQLite's half of CommunityStore: the communities tables (schema 6) and their reads and writes.

A mixin of SqliteStore, so the store module only gains one base class. Edges are read by rowid within the
group (the facts_group index holds them in that order), so each chunk is one seek, however large the group.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

import numpy as np

from mnemobus.shared.groups import GroupId
from mnemobus.store.communities import Community, Edge, GraphStats, nearest_communities
from mnemobus.store.contract import Hit
from mnemobus.store.model import Vector
from mnemobus.store.sqlite.rows import to_seconds, vector_of
from mnemobus.store.sqlite.tx import immediate

T = TypeVar("T")

COMMUNITY_TABLES = """
CREATE TABLE IF NOT EXISTS communities(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, fingerprint TEXT NOT NULL, summary TEXT NOT NULL,
  size INTEGER NOT NULL, embedding BLOB, updated_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS communities_group ON communities(group_id);
CREATE TABLE IF NOT EXISTS community_members(
  group_id TEXT NOT NULL, entity_id TEXT NOT NULL, community_id TEXT NOT NULL,
  PRIMARY KEY(group_id, entity_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS community_members_community ON community_members(community_id);
-- per-group upkeep: when communities were last refreshed, and how many rows eviction removed so far
CREATE TABLE IF NOT EXISTS group_upkeep(
  group_id TEXT PRIMARY KEY, refreshed_at REAL);
"""

ACTIVE = "invalid_at IS NULL AND expired_at IS NULL"


def add_communities(conn: sqlite3.Connection) -> None:
    """Schema 6: a group's communities, their members, and its upkeep record (idempotent)."""
    conn.executescript(COMMUNITY_TABLES)


def delete_group_communities(c: sqlite3.Connection, group_id: GroupId) -> None:
    """A deleted group leaves no community, member or upkeep row (inside the caller's transaction)."""
    for table in ("community_members", "communities", "group_upkeep"):
        c.execute(f"DELETE FROM {table} WHERE group_id = ?", (group_id,))


def _utc(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


class SqliteCommunities:
    """CommunityStore on the SqliteStore's connections (`_read`, `_run`, `_writer_conn`, `_write_lock`)."""

    async def active_edges(self, group_id: GroupId, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]:
        after = int(cursor) if cursor else 0

        def q(c: sqlite3.Connection) -> tuple[list[Edge], str | None]:
            rows = c.execute(f"SELECT rowid, id, subject_id, object_id FROM facts WHERE group_id = ? AND rowid > ? "
                             f"AND {ACTIVE} ORDER BY rowid LIMIT ?", (group_id, after, limit)).fetchall()
            edges = [Edge(r[1], r[2], r[3]) for r in rows]
            return edges, (str(rows[-1][0]) if len(rows) == limit else None)

        return await self._read(q)  # type: ignore[attr-defined]

    async def node_keys(self, group_id: GroupId, cursor: str | None, limit: int) -> tuple[dict[str, str], str | None]:
        after = int(cursor) if cursor else 0

        def q(c: sqlite3.Connection) -> tuple[dict[str, str], str | None]:
            rows = c.execute("SELECT rowid, id, canonical_name || char(31) || type FROM entities WHERE group_id = ?"
                             " AND rowid > ? ORDER BY rowid LIMIT ?", (group_id, after, limit)).fetchall()
            return {r[1]: r[2] for r in rows}, (str(rows[-1][0]) if len(rows) == limit else None)

        return await self._read(q)  # type: ignore[attr-defined]

    async def communities(self, group_id: GroupId) -> list[Community]:
        def q(c: sqlite3.Connection) -> list[Community]:
            members: dict[str, list[str]] = {}
            for cid, eid in c.execute(
                    "SELECT m.community_id, m.entity_id FROM community_members m JOIN entities e ON e.id = m.entity_id"
                    " WHERE m.group_id = ? ORDER BY m.entity_id", (group_id,)):
                members.setdefault(cid, []).append(eid)
            return [Community(r[0], group_id, tuple(members.get(r[0], ())), r[1], r[2], vector_of(r[3]), _utc(r[4]))
                    for r in c.execute("SELECT id, fingerprint, summary, embedding, updated_at FROM communities"
                                       " WHERE group_id = ? ORDER BY id", (group_id,))]

        return await self._read(q)  # type: ignore[attr-defined]

    async def write_communities(self, group_id: GroupId, put: Sequence[Community], drop: Sequence[str],
                                refreshed_at: datetime) -> None:
        def work() -> None:
            with immediate(self._writer_conn()) as c:  # type: ignore[attr-defined]
                gone = [*drop, *(k.id for k in put)]
                c.executemany("DELETE FROM community_members WHERE community_id = ? AND group_id = ?",
                              [(cid, group_id) for cid in gone])
                c.executemany("DELETE FROM communities WHERE id = ? AND group_id = ?", [(cid, group_id) for cid in drop])
                for k in put:
                    c.execute("INSERT OR REPLACE INTO communities(id, group_id, fingerprint, summary, size, embedding,"
                              " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                              (k.id, group_id, k.fingerprint, k.summary, len(k.members),
                               None if k.embedding is None else np.asarray(k.embedding, np.float32).tobytes(),
                               to_seconds(k.updated_at)))
                    c.executemany("INSERT OR REPLACE INTO community_members(group_id, entity_id, community_id)"
                                  " VALUES (?, ?, ?)", [(group_id, m, k.id) for m in k.members])
                c.execute("INSERT INTO group_upkeep(group_id, refreshed_at) VALUES (?, ?) ON CONFLICT(group_id)"
                          " DO UPDATE SET refreshed_at = excluded.refreshed_at", (group_id, to_seconds(refreshed_at)))

        await self._upkeep_write(work)

    async def join_community(self, group_id: GroupId, community_id: str, entity_id: str) -> bool:
        def work() -> bool:
            with immediate(self._writer_conn()) as c:  # type: ignore[attr-defined]
                if c.execute("SELECT 1 FROM communities WHERE id = ? AND group_id = ?",
                             (community_id, group_id)).fetchone() is None:
                    return False
                c.execute("INSERT OR REPLACE INTO community_members(group_id, entity_id, community_id) VALUES (?, ?, ?)",
                          (group_id, entity_id, community_id))
                c.execute("UPDATE communities SET size = (SELECT count(*) FROM community_members WHERE community_id = ?)"
                          " WHERE id = ?", (community_id, community_id))
                return True

        return await self._upkeep_write(work)

    async def has_communities(self, group_id: GroupId) -> bool:
        return await self._read(  # type: ignore[attr-defined,no-any-return]
            lambda c: c.execute("SELECT 1 FROM communities WHERE group_id = ? LIMIT 1", (group_id,)).fetchone()
            is not None)

    async def community_of(self, group_id: GroupId, entity_ids: Sequence[str]) -> dict[str, str]:
        ids = list(entity_ids)

        def q(c: sqlite3.Connection) -> dict[str, str]:
            found: dict[str, str] = {}
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                found.update(c.execute(f"SELECT entity_id, community_id FROM community_members WHERE group_id = ?"
                                       f" AND entity_id IN ({','.join('?' * len(part))})", (group_id, *part)))
            return found

        return await self._read(q)  # type: ignore[attr-defined]

    async def search_communities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        def q(c: sqlite3.Connection) -> list[Hit]:
            rows = c.execute("SELECT id, embedding FROM communities WHERE group_id = ? AND embedding IS NOT NULL",
                             (group_id,)).fetchall()
            return nearest_communities([(r[0], vector_of(r[1])) for r in rows], vector, limit)

        return await self._read(q)  # type: ignore[attr-defined]

    async def community_members(self, group_id: GroupId, community_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        ids = list(community_ids)

        def q(c: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
            found: dict[str, list[str]] = {}
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                for cid, eid in c.execute(
                        "SELECT m.community_id, m.entity_id FROM community_members m JOIN entities e ON e.id = m.entity_id"
                        f" WHERE m.group_id = ? AND m.community_id IN ({','.join('?' * len(part))}) ORDER BY m.entity_id",
                        (group_id, *part)):
                    found.setdefault(cid, []).append(eid)
            return {cid: tuple(members) for cid, members in found.items()}

        return await self._read(q)  # type: ignore[attr-defined]

    async def graph_stats(self, group_id: GroupId) -> GraphStats:
        def q(c: sqlite3.Connection) -> GraphStats:
            one: Callable[[str], int] = lambda sql: c.execute(sql, (group_id,)).fetchone()[0]  # noqa: E731
            upkeep = c.execute("SELECT refreshed_at FROM group_upkeep WHERE group_id = ?", (group_id,)).fetchone()
            # rows eviction removed so far: the life-cycle's per-group totals (sqlite/lifecycle.py)
            evicted = one("SELECT coalesce(sum(facts + entities), 0) FROM evictions WHERE group_id = ?")
            return GraphStats(
                group_id=group_id,
                entities=one("SELECT count(*) FROM entities WHERE group_id = ?"),
                active_facts=one(f"SELECT count(*) FROM facts WHERE group_id = ? AND {ACTIVE}"),
                ended_facts=one(f"SELECT count(*) FROM facts WHERE group_id = ? AND NOT ({ACTIVE})"),
                communities=one("SELECT count(*) FROM communities WHERE group_id = ?"),
                largest_community=one("SELECT coalesce(max(size), 0) FROM communities WHERE group_id = ?"),
                last_refresh=_utc(upkeep[0]) if upkeep else None,
                evicted=evicted,
            )

        return await self._read(q)  # type: ignore[attr-defined]

    async def _upkeep_write(self, work: Callable[[], T]) -> T:
        async with self._write_lock:  # type: ignore[attr-defined]
            return await self._run(work)  # type: ignore[attr-defined]

