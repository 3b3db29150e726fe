"""A recall's reads run on the event loop when its groups are loaded, and on a worker thread when a read would
wait (issue 36, mnemobus/store/sqlite/on_loop.py): a group read for the first time, a lock another thread holds,
a busy file. The loop is never held up by a wait, and a run made again on a thread answers as one on the loop."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.kernel.builtin_parts import sqlite_store
from mnemobus.shared.config import Settings
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import Episode, RecallQuery, episode_id_for
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
A, B = GroupId("user_loop"), GroupId("agent_bot__user_loop")
SAID = ("Josh lives in Lisbon.", "Anna climbs with Josh every Sunday.", "Maria plays chess on Fridays.")
QUESTION = "where does Josh live and who climbs with Anna?"


@pytest.fixture
async def path(tmp_path: Path) -> Path:
    """A file with both groups written, and no process holding them loaded."""
    at = datetime(2026, 5, 1, tzinfo=UTC)
    store = SqliteStore(tmp_path / "loop.sqlite3")
    await store.open()
    engine = MemoryEngine(store, embedder=HashEmbedder())
    turns = [Episode(id=episode_id_for(g, f"m{i}", "user"), group_id=g, role="user", source_message_id=f"m{i}",
                     content=SAID[i % len(SAID)], reference_time=at + timedelta(minutes=i), channel_id="c1")
             for g in (A, B) for i in range(9)]
    for outcome in await engine.ingest_many(turns):
        assert not isinstance(outcome, BaseException), outcome
    await engine.close()
    return tmp_path / "loop.sqlite3"


async def _opened(path: Path, **kw: bool) -> tuple[MemoryEngine, list[str]]:
    store = SqliteStore(path, **kw)
    await store.open()
    left: list[str] = []
    store.observe_reads_off_loop(left.append)
    return MemoryEngine(store, embedder=HashEmbedder()), left


def _query(*groups: GroupId) -> RecallQuery:
    return RecallQuery(QUESTION, groups, as_of=datetime(2026, 6, 1, tzinfo=UTC), max_facts=10, max_episodes=10)


def _threads_of(seen: list[int]):  # type: ignore[no-untyped-def]
    """A run's work that says which thread it ran on, and reads a group's vectors and graph."""
    async def work(view: GraphStore, _: None) -> list:  # type: ignore[type-arg]
        seen.append(threading.get_ident())
        return await view.search_facts_vector(A, HashEmbedder().embed([QUESTION])[0], _query(A).as_of, 5)  # type: ignore[arg-type]
    return work


def _shown(result) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    return [(i.fact.id, round(i.score, 9)) for i in result.facts] + [(i.episode.id, round(i.score, 9))
                                                                     for i in result.episodes]


async def test_a_group_read_for_the_first_time_is_read_on_a_thread_and_then_on_the_loop(path: Path) -> None:
    engine, left = await _opened(path)
    loop, seen = threading.get_ident(), []
    first = await engine.store.run_reads(_threads_of(seen), lambda: None)
    assert seen[-1] != loop and left == ["cold"], "a group not loaded yet must be read on a worker thread"
    seen.clear()
    second = await engine.store.run_reads(_threads_of(seen), lambda: None)
    assert seen == [loop] and left == ["cold"], "a loaded group must be read on the loop, once"
    assert second == first and first, "the same reads, the same answer"
    await engine.close()


async def test_a_recall_made_again_on_a_thread_shows_what_a_recall_on_the_loop_shows(path: Path) -> None:
    engine, left = await _opened(path)
    await engine.recall(_query(A))  # A loaded, B not: the next run reads A on the loop, then stalls at B
    again = await engine.recall(_query(A, B))
    assert left == ["cold", "cold"]
    on_loop = await engine.recall(_query(A, B))
    assert left == ["cold", "cold"], "both groups loaded: no run may leave the loop"
    assert _shown(again) and _shown(again) == _shown(on_loop), "a dropped run must leave nothing behind"
    await engine.close()


async def test_a_fact_graph_with_more_changed_rows_than_the_bound_catches_up_on_a_thread(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk import or a large flush of retrieval counts into a loaded group: its graph's catch-up would hold the
    loop for as long as it reads, so past `MAX_NEW_ROWS` stamps it is read on a thread, as new vectors are."""
    from mnemobus.store.sqlite import on_loop as on_loop_module

    monkeypatch.setattr(on_loop_module, "MAX_NEW_ROWS", 4)
    engine, left = await _opened(path)
    await engine.recall(_query(A))  # loaded
    await engine.recall(_query(A))
    assert left == ["cold"]
    with sqlite3.connect(path) as other:  # another process's writes: every fact of the group stamped, five times
        facts = other.execute("SELECT count(*) FROM facts WHERE group_id = ?", (A,)).fetchone()[0]
        for _ in range(5):
            other.execute("UPDATE facts SET retrieval_count = retrieval_count + 1 WHERE group_id = ?", (A,))
    assert 5 * facts > 4, "the writes must stamp more rows than the bound"
    caught_up = await engine.recall(_query(A))
    assert left == ["cold", "grown"]
    assert _shown(caught_up) == _shown(await engine.recall(_query(A))) and left == ["cold", "grown"]
    await engine.close()


async def test_a_lock_another_thread_holds_sends_the_run_to_a_thread_and_the_loop_runs_on(path: Path) -> None:
    engine, left = await _opened(path)
    store = engine.store
    assert isinstance(store, SqliteStore)
    expected = _shown(await engine.recall(_query(A)))
    lock = store.vectors._key_lock(("facts", A))  # what a thread loading the group's vectors holds
    lock.acquire()
    release = threading.Timer(0.4, lock.release)
    ticks: list[float] = []
    got = []

    async def recall() -> None:
        got.append(await engine.recall(_query(A)))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            release.start()
            tg.start_soon(recall)
            while not got:
                ticks.append(time.monotonic())
                await anyio.sleep(0.01)
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert left[-1] == "busy"
    assert max(gaps) < 0.2, f"the loop stood still for {max(gaps):.2f} s while the lock was held"
    assert _shown(got[0]) == expected
    await engine.close()


async def test_a_busy_file_sends_the_run_to_a_thread(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, left = await _opened(path)
    store = engine.store
    assert isinstance(store, SqliteStore)
    expected = _shown(await engine.recall(_query(A)))
    await engine.recall(_query(A))

    class BusyFile:
        """The loop's connection as it is when another connection holds the file (busy_timeout 0 waits for none)."""
        in_transaction = False

        def execute(self, sql: str, *args: object) -> None:
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
            raise busy

    monkeypatch.setattr(store, "_loop_reader", BusyFile)
    before = len(left)
    assert _shown(await engine.recall(_query(A))) == expected
    assert left[before:] == ["busy"]
    await engine.close()


async def test_other_sqlite_errors_on_the_loop_are_the_callers_not_a_reason_to_retry(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemobus.shared.errors import StoreUnavailable

    engine, left = await _opened(path)
    store = engine.store
    assert isinstance(store, SqliteStore)

    class Broken:
        in_transaction = False

        def execute(self, sql: str, *args: object) -> None:
            raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_loop_reader", Broken)
    with pytest.raises(StoreUnavailable):
        await store.run_reads(_threads_of([]), lambda: None)
    assert left == []
    await engine.close()


async def test_with_reads_on_loop_off_every_run_goes_to_a_thread(path: Path, settings: Settings) -> None:
    configured = settings.model_copy(update={"store": settings.store.model_copy(
        update={"sqlite_path": path, "sqlite_reads_on_loop": False})})
    store = sqlite_store(configured, 384)
    assert isinstance(store, SqliteStore) and not store.reads_on_loop
    await store.open()
    left: list[str] = []
    store.observe_reads_off_loop(left.append)
    seen: list[int] = []
    for _ in range(3):
        await store.run_reads(_threads_of(seen), lambda: None)
    assert threading.get_ident() not in seen and len(seen) == 3
    assert left == [], "a run that never tried the loop did not leave it"
    await store.close()


async def test_a_work_that_catches_every_error_is_still_made_again_on_a_thread(path: Path) -> None:
    engine, left = await _opened(path)
    vector = HashEmbedder().embed([QUESTION])[0]

    async def swallowing(view: GraphStore, _: None) -> object:
        try:  # as the worker's read of stored ids does, per group
            return await view.search_facts_vector(A, vector, _query(A).as_of, 5)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001
            return exc

    got = await engine.store.run_reads(swallowing, lambda: None)
    assert left == ["cold"] and isinstance(got, list) and got, "the stall, caught, must not be the answer"
    await engine.close()
