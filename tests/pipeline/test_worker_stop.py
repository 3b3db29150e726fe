"""A stop reaches a worker at once, even in the middle of an idle fetch, and loses nothing it had fetched."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.kernel.app import Runtime, open_runtime
from mnemobus.bus.dlq import list_letters
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.kernel.worker import EpisodeWorker
from tests.pipeline.conftest import wait_for_episodes

pytestmark = pytest.mark.anyio

#: an idle fetch that outlasts any test: a stop that waited for it to run out could not pass
AN_HOUR = 3600.0


def with_idle_fetch(settings: Settings, seconds: float) -> Settings:
    return settings.model_copy(update={"worker": settings.worker.model_copy(update={"idle_fetch_s": seconds})})


async def fetches_waiting(rt: Runtime) -> int:
    """Pull requests the server holds for the worker's durable: 1 while its fetch waits for episodes."""
    info = await rt.bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
    return int(info.num_waiting)


@contextlib.asynccontextmanager
async def a_worker(rt: Runtime, stop: anyio.Event) -> AsyncIterator[EpisodeWorker]:
    """A worker running until `stop` is set; leaving the block waits for its run() to return (at once when a check
    inside it failed: the worker is stopped, so the failure is reported rather than waited on forever)."""
    worker = EpisodeWorker(rt.bus, rt.engine, rt.settings, rt.metrics, instance_id="stop-test")
    async with anyio.create_task_group() as tg:
        await tg.start(worker.run, stop)
        try:
            yield worker
        except BaseException:
            stop.set()
            raise


@contextlib.asynccontextmanager
async def storing_one(rt: Runtime, ep: EpisodeMessage, stop: anyio.Event) -> AsyncIterator[EpisodeWorker]:
    """`ep` published and a worker running until it is stored; leaving the block waits for the worker to stop."""
    await rt.bus.ensure_streams()
    await rt.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id)
    async with a_worker(rt, stop) as worker:
        assert await wait_for_episodes(rt, ep.group_id, 1) == 1
        yield worker


async def test_a_stop_ends_the_workers_idle_fetch_at_once(settings):
    async with open_runtime(with_idle_fetch(settings, AN_HOUR)) as rt:
        stop = anyio.Event()
        with anyio.move_on_after(60) as waited:  # far short of the hour the fetch alone would wait
            async with a_worker(rt, stop):
                while await fetches_waiting(rt) < 1:  # the fetch is on the server, waiting for episodes
                    await anyio.sleep(0.01)
                stop.set()
        assert not waited.cancelled_caught, "the worker waited for its idle fetch to run out before stopping"


async def test_a_worker_stopped_mid_stream_leaves_every_episode_for_the_next_one(settings):
    episodes = [EpisodeMessage(episode_id=f"stop-{i}", group_id="user_josh", content=f"note number {i}",
                               source_message_id=f"s{i}") for i in range(100)]
    quick = settings.model_copy(update={"worker": settings.worker.model_copy(update={"batch": 4, "idle_fetch_s": AN_HOUR})})
    async with open_runtime(quick) as rt:
        await rt.bus.ensure_streams()
        for ep in episodes:
            await rt.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id)
        first_stop = anyio.Event()
        async with a_worker(rt, first_stop):
            await wait_for_episodes(rt, "user_josh", 1)
            first_stop.set()  # mid-stream: batches in flight finish, a fetch in progress is cut short
        stored_by_first = await rt.engine.store.count_episodes("user_josh")
        assert stored_by_first < len(episodes), "the first worker was meant to stop before the end of the stream"
        second_stop = anyio.Event()
        async with a_worker(rt, second_stop):
            assert await wait_for_episodes(rt, "user_josh", len(episodes), timeout=30) == len(episodes)
            second_stop.set()
        assert await list_letters(rt.bus, "user_josh") == []
