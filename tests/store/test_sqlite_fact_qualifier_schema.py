"""A SQLite file from before schema 8 (facts without a qualifier column) opens, keeps its facts, and stores
qualified ones."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.sqlite import SCHEMA_VERSION, SqliteStore
from test_conformance import entity, episode, fact, put  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
G = GroupId("user_qualifier_schema")


async def test_a_file_from_schema_7_opens_keeps_its_facts_and_stores_a_qualifier(tmp_path: Path) -> None:
    path = tmp_path / "schema7.sqlite3"
    ana, aml, los = entity(G, "Ana"), entity(G, "amlodipine", kind="concept"), entity(G, "losartan", kind="concept")
    ep = episode(G, "m1", "I'm on amlodipine.")
    old = fact(G, ana, "takes_medication", aml, "Ana takes amlodipine", ep=ep)
    fresh = SqliteStore(path)
    await fresh.open()
    try:
        await put(fresh, episodes=[ep], entities=[ana, aml, los], facts=[old])
    finally:
        await fresh.close()
    with sqlite3.connect(path) as conn:
        conn.executescript("ALTER TABLE facts DROP COLUMN qualifier;"
                           " UPDATE meta SET value = '7' WHERE key = 'schema_version';")
    new = replace(fact(G, ana, "takes_medication", los, "Ana takes losartan", ep=ep), qualifier="blood pressure")
    for opened in range(2):  # the step is idempotent: a second open changes nothing
        store = SqliteStore(path)
        await store.open()
        try:
            if opened == 0:
                await put(store, facts=[new])
            assert await store.get_facts(G, [old.id, new.id]) == [old, new]
        finally:
            await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert SCHEMA_VERSION == 8
