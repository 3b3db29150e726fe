"""A serving process takes what it loaded for its whole life out of the cyclic collector's sight (kernel/heap.py)."""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator

import anyio
import pytest

from mnemobus.api.service import run_api
from mnemobus.kernel import heap
from mnemobus.kernel.app import open_runtime
from mnemobus.shared.config import ApiSettings, Settings
from tests.warming_support import until_warmed, write_groups_in_order

pytestmark = pytest.mark.anyio


@pytest.fixture
def thawed() -> Iterator[None]:
    """Whatever a test froze goes back to the collector, and the process is no serving one again."""
    yield
    gc.unfreeze()
    heap._serving = False


async def _warmed_graph_is_collected(settings: Settings) -> bool:
    """Start the API on a store with one group written, wait for warming, and say whether the collector still
    walks the group's held fact graph."""
    await write_groups_in_order(settings, "user_warm")
    warming = settings.model_copy(update={"memory": settings.memory.model_copy(update={"warm_groups": 1})})
    async with open_runtime(warming) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(functools.partial(run_api, rt, api=ApiSettings(port=0, drain_timeout_s=2)))
            await until_warmed(rt.metrics)
            graph = rt.engine.store.graphs.cache.get("user_warm")
            assert graph is not None and gc.is_tracked(graph.touching)
            walked = any(o is graph.touching for o in gc.get_objects())
            rt.stop.set()
    return walked


async def test_a_serving_process_freezes_the_graphs_it_warmed(settings: Settings, thawed: None) -> None:
    heap.serving_process()
    assert not await _warmed_graph_is_collected(settings)
    assert gc.get_freeze_count() > 0


async def test_a_process_embedding_the_engine_keeps_its_collector_walking_everything(
        settings: Settings, thawed: None) -> None:
    frozen_before = gc.get_freeze_count()
    assert await _warmed_graph_is_collected(settings)
    assert gc.get_freeze_count() == frozen_before
