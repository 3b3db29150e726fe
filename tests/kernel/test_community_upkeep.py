"""The worker's community upkeep (mnemobus/kernel/community_upkeep.py) on a real SQLite store: what queues a refresh.

Why here and not only through the bus: a batch stored while a refresh runs is a matter of timing there (it queued a
second full refresh back to back with the first, which placed a new entity before its vote: the vote test of
tests/api/test_graph_upkeep.py failed once in a CI run and once in ten runs here); here the refresh is held
running while the batch is stored."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embedders import make_embedder
from mnemobus.kernel.community_upkeep import CommunityUpkeep
from mnemobus.shared.config import CommunitiesSettings, ExtractionSettings
from mnemobus.shared.groups import GroupId
from mnemobus.shared.metrics import CommunityMetrics, LlmMetrics
from mnemobus.store.sqlite import SqliteStore
from tests.store.test_conformance import episode

pytestmark = pytest.mark.anyio
G = GroupId("user_upkeep")


async def test_a_batch_stored_while_a_refresh_runs_queues_no_second_refresh(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "m.sqlite3")
    await store.open()
    engine = MemoryEngine(store, embedder=make_embedder("hash", "", None))
    upkeep = CommunityUpkeep(engine, CommunitiesSettings(refresh_every_episodes=0, propagation="thread"),
                             ExtractionSettings(), LlmMetrics(), CommunityMetrics())
    assert upkeep.refresher is not None
    try:
        await engine.ingest_many([episode(G, f"m{i}", text) for i, text in enumerate((
            "Alice works at Acme.", "Bob works at Acme.", "Carol lives in Paris.", "Dave lives in Paris."))])
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(upkeep.run, stop)
            with upkeep.ingesting():  # the refresh waits at its first chunk until ingestion is idle
                tg.start_soon(upkeep.refresher.refresh, G)  # asked for over the API, say
                with anyio.fail_after(10):
                    while not upkeep.refresher.refreshing(G):
                        await anyio.sleep(0.01)
                erin = [episode(G, "m10", "Erin works at Acme.")]
                await engine.ingest_many(erin)
                upkeep.stored(erin)
            with anyio.fail_after(30):
                while upkeep.refresher.refreshing(G):
                    await anyio.sleep(0.01)
                await upkeep.idle.wait()
            stop.set()
        assert upkeep.outcomes == []  # the worker ran no refresh of its own, only Erin's vote
        assert upkeep.refresher.metrics.refreshes.labels(outcome="finished")._value.get() == 1  # the one asked for
    finally:
        await store.close()
