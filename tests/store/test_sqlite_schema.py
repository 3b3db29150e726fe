"""A SQLite file written by an older mnemobus opens in this one, its rows intact."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.sqlite import SCHEMA_VERSION, SqliteStore
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
