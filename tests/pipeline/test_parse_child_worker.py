"""The worker's full batches of several groups go through the parse child (engine/parse_process.py) end to end:
episodes published on the bus are stored with the graph, and the child did parse part of the batch."""

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from mnemobus.engine.parse_process import ProcessSplitExtractor
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.shared import subjects
from mnemobus.shared.envelope import EpisodeMessage
from tests.pipeline.conftest import wait_for_episodes

pytestmark = pytest.mark.anyio

TALK = ["My sister Ana lives in York.", "She moved to Leeds last month.", "I work at Lumen as a designer.",
        "I use vim every day.", "Alex works on ProjectX", "I moved from Paris to Berlin."]
T0 = datetime(2026, 6, 1, tzinfo=UTC)


async def a_full_batch_stored(rt) -> list[int]:  # type: ignore[no-untyped-def]
    """32 episodes in 8 groups on the stream before the worker starts (so its first fetch takes them all), then
    the worker served until each group holds its 4; the counts stored."""
    for t in range(4):
        for g in range(8):
            ep = EpisodeMessage(episode_id=f"g{g}t{t}", group_id=f"user_{g}", role="user",
                                content=TALK[(t + g) % len(TALK)], source_message_id=f"g{g}t{t}",
                                reference_time=T0 + timedelta(days=t))
            await rt.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire())
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: serve(rt, {"worker"}, task_status=task_status))
        stored = [await wait_for_episodes(rt, f"user_{g}", 4) for g in range(8)]
        rt.stop.set()
    return stored


async def test_a_full_batch_published_on_the_bus_is_stored_with_the_parse_child_sharing_its_parse(settings):
    settings = settings.model_copy(update={"extraction": settings.extraction.model_copy(update={"parse_child": True})})
    async with open_runtime(settings) as rt:
        assert isinstance(rt.engine.extractor, ProcessSplitExtractor)
        assert await a_full_batch_stored(rt) == [4] * 8
        assert rt.engine.extractor.split_batches >= 1 and rt.engine.extractor.failures == 0
        assert rt.engine._extractor_failed == [rt.metrics.parse_child_failures.inc]  # noqa: SLF001 - a lost chunk is counted
        assert sum([await rt.engine.store.count_facts(f"user_{g}") for g in range(8)]) > 8


async def test_the_worker_overlapping_its_batches_starts_no_parse_child_under_auto(settings):
    """Its batches in flight already keep the second core busy; there the child gained nothing for ~300 MB."""
    settings = settings.model_copy(update={"extraction": settings.extraction.model_copy(update={"parse_child": "auto"})})
    assert settings.worker.batches_in_flight > 1
    async with open_runtime(settings) as rt:
        assert isinstance(rt.engine.extractor, ProcessSplitExtractor) and rt.engine.extractor.auto
        rt.engine.extractor.meter.core_free = lambda: True  # type: ignore[method-assign] # a core free, whatever the load
        assert await a_full_batch_stored(rt) == [4] * 8
        assert (rt.engine.extractor.split_batches, rt.engine.extractor.started) == (0, 0)
