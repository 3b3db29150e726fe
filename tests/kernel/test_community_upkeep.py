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


async def four_people_at_two_places(tmp_path: Path) -> tuple[SqliteStore, MemoryEngine, CommunityUpkeep]:
    """A store holding four people at two places, its engine, and an upkeep that refreshes only when asked."""
    store = SqliteStore(tmp_path / "m.sqlite3")
    await store.open()
    engine = MemoryEngine(store, embedder=make_embedder("hash", "", None))
    upkeep = CommunityUpkeep(engine, CommunitiesSettings(refresh_every_episodes=0, propagation="thread"),
                             ExtractionSettings(), LlmMetrics(), CommunityMetrics())
    assert upkeep.refresher is not None
    await engine.ingest_many([episode(G, f"m{i}", text) for i, text in enumerate((
        "Alice works at Acme.", "Bob works at Acme.", "Carol lives in Paris.", "Dave lives in Paris."))])
    return store, engine, upkeep


async def test_a_batch_stored_while_a_refresh_runs_queues_no_second_refresh(tmp_path: Path) -> None:
    store, engine, upkeep = await four_people_at_two_places(tmp_path)
    assert upkeep.refresher is not None
    try:
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


async def _votes_after(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, refreshed_first: bool) -> tuple[int, dict]:
    """A batch stored and voted on by the upkeep; the neighbour walks its vote made, and the votes counted."""
    store, engine, upkeep = await four_people_at_two_places(tmp_path)
    assert upkeep.refresher is not None
    walks = 0
    plain_walk = store.walk

    async def counted_walk(*a, **k):  # type: ignore[no-untyped-def]
        nonlocal walks
        walks += 1
        return await plain_walk(*a, **k)

    try:
        if refreshed_first:
            await upkeep.refresher.refresh(G)
        monkeypatch.setattr(store, "walk", counted_walk)
        erin = [episode(G, "m10", "Erin works at Acme.")]
        await engine.ingest_many(erin)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(upkeep.run, stop)
            upkeep.stored(erin)
            with anyio.fail_after(30):
                await upkeep.idle.wait()
            stop.set()
        votes = {o: upkeep.refresher.metrics.votes.labels(outcome=o)._value.get() for o in ("joined", "none", "failed")}
        return walks, votes
    finally:
        await store.close()


async def test_a_group_with_no_community_yet_casts_no_vote_and_walks_no_neighbours(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walks, votes = await _votes_after(tmp_path, monkeypatch, refreshed_first=False)
    assert walks == 0 and votes == {"joined": 0, "none": 0, "failed": 0}


async def test_a_group_with_communities_still_places_a_new_entity_by_its_neighbours(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walks, votes = await _votes_after(tmp_path, monkeypatch, refreshed_first=True)
    assert walks >= 1 and votes["joined"] >= 1 and votes["failed"] == 0
