"""A SQLite file written by an older mnemobus opens in this one, its rows intact."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.sqlite import SCHEMA_VERSION, SqliteStore
from mnemobus.store.sqlite.store import MENTIONS
from test_conformance import episode, put  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
G = GroupId("user_schema")


async def test_a_file_from_before_episode_speakers_opens_and_keeps_its_episodes(tmp_path: Path) -> None:
    path = tmp_path / "schema3.sqlite3"
    store = SqliteStore(path)
    await store.open()
    old = episode(G, "m1", "I live in Lyon.")
    await put(store, episodes=[old])
    await store.close()
    with sqlite3.connect(path) as conn:  # the episodes table as schema 3 made it
        conn.execute("ALTER TABLE episodes DROP COLUMN speaker")
        conn.execute("ALTER TABLE episodes DROP COLUMN name")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    store = SqliteStore(path)
    await store.open()
    try:
        assert await store.get_episode(G, old.id) == replace(old, speaker=None, name=None)
        new = episode(G, "m2", "I moved to Nice.")
        await put(store, episodes=[new])
        assert await store.get_episode(G, new.id) == new
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


async def test_a_file_from_before_the_mentions_index_gets_it_and_a_mention_read_never_reads_a_turns_row(
        tmp_path: Path) -> None:
    # through the primary key, each mention read the turn's row (its text and vector) for its group and time:
    # 3.0-3.3 ms CPU for 50 entities at 100k turns, against 1.3 ms from the index alone
    path = tmp_path / "schema8.sqlite3"
    store = SqliteStore(path)
    await store.open()
    await put(store, episodes=[episode(G, "m1", "I live in Lyon.")])
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX episodes_mentioned")
    store = SqliteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + MENTIONS.format(marks="?"), ("e", G, 0.0))]
    assert any("COVERING INDEX episodes_mentioned" in step for step in plan), plan
