"""A SQLite file from before schema 7 (no eviction totals, no promoted memories) opens and gains both."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.lifecycle import Promoted
from mnemobus.store.model import Episode
from mnemobus.store.sqlite import SCHEMA_VERSION, SqliteStore
from test_conformance import episode, put  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
G = GroupId("user_schema")


async def schema_4_file(path: Path, kept: Episode) -> None:
    """A file holding `kept`, as schema 4 left it: no eviction totals, no promoted memories."""
    fresh = SqliteStore(path)
    await fresh.open()
    try:
        await put(fresh, episodes=[kept])
    finally:
        await fresh.close()
    with sqlite3.connect(path) as conn:
        conn.executescript("DROP TABLE evictions; DROP TABLE promoted;"
                           " UPDATE meta SET value = '4' WHERE key = 'schema_version';")


async def test_a_file_from_schema_4_opens_keeps_its_rows_and_holds_promoted_memories(tmp_path: Path) -> None:
    path = tmp_path / "schema4.sqlite3"
    old = episode(G, "m1", "I live in Lyon.")
    await schema_4_file(path, old)
    memory = Promoted(id="p1", group_id=G, kind="lesson", scope="user", text="pin versions", author="josh",
                      created_at=datetime(2026, 1, 1, tzinfo=UTC))
    for _ in range(2):  # the step is idempotent: a second open changes nothing
        store = SqliteStore(path)
        await store.open()
        try:
            assert await store.get_episode(G, old.id) == old
            await store.add_promoted(memory)
            assert await store.promoted(G) == [memory]
            assert (await store.evicted_so_far(G)).empty
        finally:
            await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert SCHEMA_VERSION >= 7  # schema 8 (a fact's qualifier) came after: test_sqlite_fact_qualifier_schema.py
