"""An episode the worker is storing when its group is erased is acked as erased: never stored, never retried, never
dead-lettered (store/erasures.py; the two-process race itself: tests/store/test_erasure_two_processes.py)."""

from __future__ import annotations

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.kernel.app import open_runtime
from mnemobus.bus.dlq import list_letters
from mnemobus.shared.config import Settings
from mnemobus.engine import MemoryEngine
from mnemobus.engine.extract import Extraction
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode
from mnemobus.kernel.worker import EpisodeWorker

pytestmark = pytest.mark.anyio


class HeldExtractor:
    """Extraction that waits for the test: the episode's write is under way meanwhile."""

    name = "held"

    def __init__(self) -> None:
        self.started, self.go = anyio.Event(), anyio.Event()

    async def extract(self, episode: Episode) -> Extraction:
        self.started.set()
        await self.go.wait()
        return Extraction()


async def test_an_episode_whose_group_is_erased_while_it_is_stored_is_acked_as_erased(settings: Settings) -> None:
    group = GroupId("user_josh")
    async with open_runtime(settings) as rt:
        await rt.bus.ensure_streams()
        held = HeldExtractor()
        engine = MemoryEngine(rt.engine.store, extractor=held, embedder=rt.engine.embedder)
        worker = EpisodeWorker(rt.bus, engine, rt.settings, rt.metrics, instance_id="erased-test")
        erased = rt.metrics.episodes_erased._value.get()
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            await tg.start(worker.run, stop)
            ep = EpisodeMessage(episode_id="in-flight", group_id=group, content="I live in Berlin.",
                                source_message_id="s1")
            await rt.bus.js_publish(subjects.episode(group), ep.to_wire(), msg_id=ep.episode_id)
            with anyio.fail_after(30):
                await held.started.wait()
                await rt.engine.store.delete_groups([group])
                held.go.set()
                while rt.metrics.episodes_erased._value.get() == erased:
                    await anyio.sleep(0.02)
            stop.set()
        info = await rt.bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
        assert await rt.engine.store.count_episodes(group) == 0
        assert info.num_ack_pending == 0 and info.num_pending == 0  # acked, nothing left to redeliver
        assert await list_letters(rt.bus, group) == []
