"""Each group's count of erasures on SQLite (see store/erasures.py): a table of its own, which outlives the groups.

Created if missing at open (an idempotent step: a file written before it simply has no erasures counted yet), so
no schema version is needed for it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from mnemobus.shared.groups import GroupId
from mnemobus.store.erasures import GroupErased


def add_erasure_counts(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS group_erasures(group_id TEXT PRIMARY KEY, n INTEGER NOT NULL) "
                 "WITHOUT ROWID")


def count_erasures(c: sqlite3.Connection, groups: Sequence[str]) -> None:
    """One more erasure of each group, in the erasing transaction."""
    c.executemany("INSERT INTO group_erasures(group_id, n) VALUES (?, 1) "
                  "ON CONFLICT(group_id) DO UPDATE SET n = n + 1", [(g,) for g in dict.fromkeys(groups)])


def erasures_of(c: sqlite3.Connection, groups: Sequence[str]) -> dict[GroupId, int]:
    found = dict(c.execute(f"SELECT group_id, n FROM group_erasures WHERE group_id IN "
                           f"({','.join('?' * len(groups))})", list(groups)).fetchall()) if groups else {}
    return {GroupId(g): int(found.get(g, 0)) for g in groups}


def check_not_erased(c: sqlite3.Connection, group_id: GroupId, seen: int) -> None:
    """Inside BEGIN IMMEDIATE: no other process's erasure can commit until this transaction ends."""
    if erasures_of(c, [group_id])[group_id] != seen:
        raise GroupErased(group_id)
