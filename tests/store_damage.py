"""Damage as another program or an older build leaves it in a SQLite store, for the tests of finding and mending
it: the rows stay sound, what is broken is an index derived from them or a page of the file itself."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Entity, Fact
from mnemobus.store.sqlite import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GROUP = GroupId("user_a")


def load_facts(store: SqliteStore, n: int = 60) -> None:
    """n facts of GROUP, one of them (f7) the only one that says "kombucha"."""
    people = [Entity(id=f"p{i}", group_id=GROUP, name=f"Person{i}", canonical_name=f"person{i}") for i in range(3)]
    facts = [(Fact(id=f"f{i}", group_id=GROUP, subject_id=people[i % 3].id, object_id=people[(i + 1) % 3].id,
                   subject_name=people[i % 3].name, object_name=people[(i + 1) % 3].name, relation="knows",
                   edge_type="semantic", fact=f"{people[i % 3].name} drinks {'kombucha' if i == 7 else 'water'}",
                   confidence=0.9, valid_at=T0, invalid_at=None, created_at=T0), None) for i in range(n)]
    store.bulk_load_sync([(p, None) for p in people], facts)


def scramble(path: Path, *tables: str) -> None:
    """0xff over every segment of each full-text index; its rows and the file's b-trees stay sound. The same bytes
    every run: random ones decoded as a valid segment now and then (a test failed once in ~70 runs), and zeros read
    as empty segments, which no query notices."""
    conn = sqlite3.connect(path)
    with conn:
        for table in tables:
            blocks = conn.execute(f"SELECT id, length(block) FROM {table}_data WHERE id > 10").fetchall()
            conn.executemany(f"UPDATE {table}_data SET block = ? WHERE id = ?", [(b"\xff" * n, i) for i, n in blocks])
    conn.close()


def overwrite_page(path: Path, table: str) -> None:
    """0xff over the table's root page: damage in the file's own b-tree, not in anything derived."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.close()
    with path.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(b"\xff" * page_size)
