"""SqliteStore finds damage in its own file, names it, and mends what is derived: a full-text index is rebuilt
from the rows it indexes; a damaged page of the file is named as beyond an in-place repair."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from mnemobus.shared.errors import StoreCorrupt
from mnemobus.store.contract import ChecksIntegrity
from mnemobus.store.sqlite import SqliteStore
from tests.store_damage import GROUP, T0, load_facts, overwrite_page, scramble

pytestmark = pytest.mark.anyio

async def test_a_sound_store_reports_no_damage(sqlite_store: SqliteStore) -> None:
    load_facts(sqlite_store)
    assert isinstance(sqlite_store, ChecksIntegrity)
    assert await sqlite_store.damage() == []


async def test_a_damaged_full_text_index_is_named_as_repairable(sqlite_store: SqliteStore) -> None:
    load_facts(sqlite_store)
    scramble(sqlite_store.path, "facts_fts")
    [found] = await sqlite_store.damage()
    assert found.part == "facts_fts" and found.repairable
    assert "facts" in found.detail and "malformed" in found.detail


async def test_a_search_over_a_damaged_index_raises_store_corrupt_naming_the_repair(sqlite_store: SqliteStore) -> None:
    load_facts(sqlite_store)
    scramble(sqlite_store.path, "facts_fts")
    with pytest.raises(StoreCorrupt, match="mnemobus doctor --repair"):
        await sqlite_store.search_facts_text(GROUP, ["kombucha"], T0, 5)


async def test_a_repair_rebuilds_the_index_from_its_rows_and_the_search_finds_them_again(
        sqlite_store: SqliteStore) -> None:
    load_facts(sqlite_store)
    scramble(sqlite_store.path, "facts_fts")
    await sqlite_store.repair(["facts_fts"])
    assert await sqlite_store.damage() == []
    assert [h.id for h in await sqlite_store.search_facts_text(GROUP, ["kombucha"], T0, 5)] == ["f7"]


async def test_a_repair_refuses_a_part_that_is_not_a_full_text_index(sqlite_store: SqliteStore) -> None:
    with pytest.raises(ValueError, match="not a full-text index"):
        await sqlite_store.repair(["facts"])


async def test_a_damaged_page_of_the_file_is_named_as_beyond_repair_in_place(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    await store.open()
    load_facts(store)
    await store.close()
    overwrite_page(store.path, "episodes")
    store = SqliteStore(tmp_path / "s.sqlite3")
    await store.open()
    try:
        found = await store.damage()
    finally:
        await store.close()
    assert [(d.part, d.repairable) for d in found] == [("file", False)]
    assert "malformed" in found[0].detail


async def test_a_check_waits_for_another_writers_lock_instead_of_failing(sqlite_store: SqliteStore) -> None:
    """doctor runs beside a live worker, which holds the write lock a batch at a time (here 2 s, twice the store's
    usual wait)."""
    load_facts(sqlite_store)
    other = sqlite3.connect(sqlite_store.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_commit_after, other, 2.0)
            assert await sqlite_store.damage() == []
    finally:
        other.close()


async def _commit_after(conn: sqlite3.Connection, seconds: float) -> None:
    await anyio.sleep(seconds)
    conn.execute("COMMIT")


async def test_a_file_that_is_not_a_database_is_refused_at_open_naming_it_and_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "not-a-store.sqlite3"
    path.write_bytes(b"these are notes, not a database " * 200)
    with pytest.raises(StoreCorrupt) as refused:
        await SqliteStore(path).open()
    assert str(path) in str(refused.value) and "MNEMOBUS_STORE__SQLITE_PATH" in str(refused.value)
    assert "--repair" not in str(refused.value)  # nothing a rebuild of an index could mend
