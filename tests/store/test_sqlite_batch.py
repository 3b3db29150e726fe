"""SqliteStore's one-hop paths: many transactions or many reads in one worker-thread hop."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from mnemobus.shared.errors import StoreIntegrityError
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore, WriteTxn
from mnemobus.store.model import Episode
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
G = GroupId("user_a")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "b.sqlite3")
    await s.open()
    yield s  # type: ignore[misc]
    await s.close()


def _episode(msg: str) -> Episode:
    return Episode(id=msg, group_id=G, content=f"message {msg}", role="user", source_message_id=msg, reference_time=T0)


def _insert(msg: str):  # type: ignore[no-untyped-def]
    async def work(txn: WriteTxn) -> bool:
        return await txn.insert_episode(_episode(msg), screened=False, embedding=None)

    return work


async def test_each_work_is_atomic_on_its_own_and_a_failure_stays_in_its_slot(store: SqliteStore) -> None:
    async def half_then_fail(txn: WriteTxn) -> bool:
        await txn.insert_episode(_episode("m2"), screened=False, embedding=None)
        raise StoreIntegrityError("refused after a write")

    results = await store.run_transactions([_insert("m1"), half_then_fail, _insert("m3"), _insert("m1")])
    assert results[0] is True and isinstance(results[1], StoreIntegrityError) and results[2:] == [True, False]
    assert [e.id for e in await store.get_episodes(G, ["m1", "m2", "m3"])] == ["m1", "m3"]


async def test_a_store_failure_midway_fails_every_slot_and_keeps_nothing_of_the_batch(store: SqliteStore) -> None:
    import sqlite3

    from mnemobus.shared.errors import StoreUnavailable

    async def disk_fails(txn: WriteTxn) -> bool:
        await txn.insert_episode(_episode("m2"), screened=False, embedding=None)
        raise sqlite3.OperationalError("disk I/O error")

    results = await store.run_transactions([_insert("m1"), disk_fails, _insert("m3")])
    assert [type(r) for r in results] == [StoreUnavailable] * 3  # m1 was not committed either: it is retried
    assert await store.count_episodes() == 0


async def test_a_work_that_suspends_is_refused_and_rolled_back(store: SqliteStore) -> None:
    async def suspends(txn: WriteTxn) -> None:
        await txn.insert_episode(_episode("m1"), screened=False, embedding=None)
        await anyio.sleep(0)

    (result,) = await store.run_transactions([suspends])
    assert isinstance(result, RuntimeError) and await store.count_episodes() == 0


async def test_reads_in_one_hop_see_committed_rows(store: SqliteStore) -> None:
    await store.run_transactions([_insert("m1"), _insert("m2")])

    async def reads(view: GraphStore, prepared: str) -> tuple[str, int, list[str]]:
        return prepared, await view.count_episodes(G), [e.id for e in await view.get_episodes(G, ["m2", "m1"])]

    assert await store.run_reads(reads, lambda: "prepared") == ("prepared", 2, ["m2", "m1"])


async def test_a_closed_store_fails_every_slot_as_unavailable(store: SqliteStore) -> None:
    from mnemobus.shared.errors import StoreUnavailable

    await store.close()
    results = await store.run_transactions([_insert("m1"), _insert("m2")])
    assert [type(r) for r in results] == [StoreUnavailable, StoreUnavailable]


async def test_concurrent_reads_share_a_bounded_pool_of_reader_connections(store: SqliteStore) -> None:
    """Each connection holds its own page cache: one per worker thread grew a plugin's RSS by a gigabyte."""
    from mnemobus.store.sqlite import READERS

    async def reads(view: GraphStore, _: None) -> int:
        return await view.count_episodes(G)

    await store.run_reads(reads, lambda: None)  # the loop's own connection, which is not one of the pool's
    async with anyio.create_task_group() as tg:
        for _ in range(50):
            tg.start_soon(store.run_reads, reads, lambda: None)
            tg.start_soon(store.count_episodes, G)
    assert 1 <= len(store._readers) <= READERS
    assert len(store._loop_readers) == 1
