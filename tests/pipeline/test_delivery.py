"""Nothing lost, nothing doubled: idempotent episodes, retries, dead letters, drain."""

import sqlite3
import threading
import time

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.bus.dlq import list_letters
from mnemobus.shared.envelope import EpisodeMessage
from tests.bus_counts import worker_settled
from tests.pipeline.conftest import ask, dead_letters, request, wait_for_episodes

pytestmark = pytest.mark.anyio


def _episode(i: int, group: str = "user_josh") -> EpisodeMessage:
    return EpisodeMessage(episode_id=f"ep-{i}", group_id=group, content=f"message number {i}", source_message_id=f"m{i}")


async def test_redelivered_episode_writes_no_second_copy(pipeline):
    ep = _episode(1)
    await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire())
    await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire())
    with anyio.move_on_after(5):
        while pipeline.metrics.episodes_stored.labels(created="false")._value.get() < 1:
            await anyio.sleep(0.02)
    assert pipeline.metrics.episodes_stored.labels(created="false")._value.get() == 1
    assert await pipeline.engine.store.count_episodes("user_josh") == 1


async def test_server_drops_a_republished_episode_with_the_same_message_id(pipeline):
    ep = _episode(2)
    first = await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id)
    again = await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id)
    assert first.duplicate is not True and again.duplicate is True


async def test_episode_is_held_while_the_store_is_locked_and_stored_once_after(pipeline):
    path = pipeline.settings.store.sqlite_path
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        con = sqlite3.connect(path, timeout=10)
        con.execute("BEGIN EXCLUSIVE")
        locked.set()
        release.wait(10)
        con.rollback()
        con.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(5)
        for i in range(5):
            ep = _episode(100 + i)
            await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire())
        with anyio.move_on_after(10):
            while pipeline.metrics.worker_store_waits._value.get() < 1:
                await anyio.sleep(0.05)
        assert pipeline.metrics.worker_store_waits._value.get() >= 1  # held, not retried (test_store_outage.py)
    finally:
        release.set()
        holder.join()
    assert await wait_for_episodes(pipeline, "user_josh", 5, timeout=20) == 5
    assert await worker_settled(pipeline.bus)  # no retry still on its way
    assert await pipeline.engine.store.count_episodes("user_josh") == 5
    assert await list_letters(pipeline.bus, "user_josh") == []


async def test_episode_that_keeps_failing_is_dead_lettered_after_max_deliver(pipeline, monkeypatch):
    from mnemobus.shared.errors import StoreUnavailable

    async def always_down(episodes):
        return [StoreUnavailable("disk is on fire") for _ in episodes]

    monkeypatch.setattr(pipeline.engine, "ingest_many", always_down)
    ep = _episode(7)
    await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), headers={"X-Trace": "t-7"})
    letters = await dead_letters(pipeline, "user_josh", timeout=15)
    letter = letters[0].letter
    assert letter.reason == "store_unavailable" and "disk is on fire" in letter.error
    assert letter.attempts == pipeline.settings.worker.max_deliver
    assert letter.headers["X-Trace"] == "t-7"
    assert EpisodeMessage.model_validate_json(letter.data).episode_id == "ep-7"


async def test_dead_letters_can_be_replayed_into_the_store(pipeline, monkeypatch):
    from mnemobus.bus import dlq
    from mnemobus.shared.errors import StoreUnavailable

    real = pipeline.engine.ingest_many

    async def down(episodes):
        raise StoreUnavailable("maintenance")

    monkeypatch.setattr(pipeline.engine, "ingest_many", down)
    ep = _episode(8)
    await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire())
    await dead_letters(pipeline, "user_josh", timeout=15)
    monkeypatch.setattr(pipeline.engine, "ingest_many", real)
    report = await dlq.replay(pipeline.bus, "user_josh")
    assert (report.replayed, report.truncated, report.kept) == (1, 0, [])
    assert await wait_for_episodes(pipeline, "user_josh", 1) == 1
    assert await dlq.list_letters(pipeline.bus, "user_josh") == []


async def test_stopping_drains_a_request_already_in_flight(pipeline):
    async def slow_agent(msg):
        await anyio.sleep(0.5)
        await msg.respond(b'{"content": "done slowly"}')

    await pipeline.bus.nc.subscribe(subjects.skill_execute("slow"), cb=slow_agent)
    result = {}

    async def call():
        result.update(await ask(pipeline, request("take your time", agent="slow")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.sleep(0.15)
        pipeline.stop.set()
    assert result["content"] == "done slowly"
