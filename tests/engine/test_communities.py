"""Community refresh and votes on a real SQLite store (issue 39): bounded, resumable, cancellable, and no
summary work for an unchanged graph."""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from mnemobus.engine.communities import EMBED_SLICE, CommunityRefresher, RefreshSettings
from mnemobus.engine.community_summary import Sketch
from mnemobus.engine.ingest import entity_id_for
from mnemobus.engine.embed import Embedder, HashEmbedder
from mnemobus.engine.embed_static import StaticEmbedder
from mnemobus.engine.embedders import portable_spec
from mnemobus.engine.label_propagation import Propagation, triples
from mnemobus.shared.groups import GroupId
from mnemobus.shared.metrics import CommunityMetrics
from mnemobus.store.communities import Edge
from mnemobus.store.sqlite import SqliteStore

from tests.engine.community_support import cliques, link, person

pytestmark = pytest.mark.anyio
G = GroupId("g_comm")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(tmp_path / "c.sqlite3")
    await s.open()
    yield s
    await s.close()


def load(store: SqliteStore, entities: list, facts: list) -> None:
    store.bulk_load_sync([(e, None) for e in entities], [(f, None) for f in facts])


def members(found: list) -> list[tuple[str, ...]]:
    return sorted(f.members for f in found)


def test_two_cliques_joined_by_one_fact_are_two_communities_whatever_the_edge_order() -> None:
    _, facts = cliques(G, [4, 5])
    edges = [Edge(f.id, f.subject_id, f.object_id) for f in facts]
    first = Propagation(triples(edges))
    assert first.run(lambda: False, 20)
    shuffled = edges[:]
    random.Random(7).shuffle(shuffled)
    again = Propagation(triples(shuffled))
    again.run(lambda: False, 20)
    assert members(first.communities(G)) == members(again.communities(G))
    assert [len(m) for m in members(first.communities(G))] == [4, 5]
    assert [f.fingerprint for f in first.communities(G)] == [f.fingerprint for f in again.communities(G)]


def test_a_fingerprint_changes_when_a_fact_inside_the_community_changes() -> None:
    _, facts = cliques(G, [4, 5])
    edges = [Edge(f.id, f.subject_id, f.object_id) for f in facts]
    before = Propagation(triples(edges))
    before.run(lambda: False, 20)
    a, b = edges[0].subject_id, edges[0].object_id
    after = Propagation(triples([*edges, Edge("another fact", a, b)]))
    after.run(lambda: False, 20)
    changed = {f.members: f.fingerprint for f in before.communities(G)} != {
        f.members: f.fingerprint for f in after.communities(G)}
    assert changed
    assert sum(x.fingerprint == y.fingerprint for x, y in zip(before.communities(G), after.communities(G))) == 1


async def test_a_refresh_stores_each_community_with_a_summary_of_its_central_members(store: SqliteStore) -> None:
    entities, facts = cliques(G, [3, 4])
    hub = person(G, "hub")
    load(store, [*entities, hub], [*facts, *(link(G, hub, "leads", e) for e in entities[3:])])
    outcome = await CommunityRefresher(store, HashEmbedder()).refresh(G)
    assert (outcome.finished, outcome.communities, outcome.summaries) == (True, 2, 2)
    stored = {len(k.members): k for k in await store.communities(G)}
    assert stored[5].summary.startswith("Hub, ")  # the most connected member is named first
    assert "Hub leads K1_0" in stored[5].summary and stored[5].embedding is not None
    hits = await store.search_communities_vector(G, HashEmbedder().embed([stored[5].summary])[0], 1)
    assert hits[0].id == stored[5].id


async def test_a_second_refresh_of_an_unchanged_graph_does_no_summary_work(store: SqliteStore) -> None:
    entities, facts = cliques(G, [3, 4, 5], bridges=2)
    load(store, entities, facts)
    metrics = CommunityMetrics()
    refresher = CommunityRefresher(store, HashEmbedder(), metrics=metrics)
    first = await refresher.refresh(G)
    second = await refresher.refresh(G)
    assert first.summaries == 3
    assert (second.finished, second.changed, second.unchanged, second.summaries) == (True, 0, 3, 0)
    assert metrics.summaries.labels(outcome="made")._value.get() == 3
    assert metrics.summaries.labels(outcome="skipped")._value.get() == 3


async def test_a_community_that_changed_is_summarised_again_and_only_it(store: SqliteStore) -> None:
    entities, facts = cliques(G, [3, 4], bridges=0)
    load(store, entities, facts)
    refresher = CommunityRefresher(store, HashEmbedder())
    await refresher.refresh(G)
    newcomer = person(G, "newcomer")
    load(store, [newcomer], [link(G, newcomer, "knows", entities[0]), link(G, newcomer, "likes", entities[1])])
    again = await refresher.refresh(G)
    assert (again.changed, again.unchanged, again.summaries) == (1, 1, 1)


async def test_a_refresh_out_of_time_resumes_where_it_stopped_and_ends_with_the_same_communities(
        store: SqliteStore, tmp_path: Path) -> None:
    entities, facts = cliques(G, [6, 7, 8], bridges=2)
    load(store, entities, facts)
    sliced = CommunityRefresher(store, None, settings=RefreshSettings(chunk_size=10, time_budget_s=0.0))
    slices = 1
    while not (await sliced.refresh(G)).finished:
        assert sliced.resumable(G)
        slices += 1
    assert slices > 3  # one chunk of ten edges per slice: 78 edges
    in_one = SqliteStore(tmp_path / "one.sqlite3")
    await in_one.open()
    load(in_one, entities, facts)
    await CommunityRefresher(in_one, None).refresh(G)
    assert [k.members for k in await store.communities(G)] == [k.members for k in await in_one.communities(G)]
    await in_one.close()


async def test_cancelling_a_refresh_in_a_thread_stops_its_thread_and_writes_nothing(store: SqliteStore) -> None:
    people, chain = graph_of(20_000, 3)
    load(store, people, chain)
    refresher = CommunityRefresher(store, None, settings=RefreshSettings(max_iterations=10_000, propagation="thread"))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(refresher.refresh, G)
            while refresher.threads_running == 0:
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        while refresher.threads_running:  # the abandoned thread notices at its next block of nodes
            await anyio.sleep(0.01)
    assert await store.communities(G) == []
    assert not refresher.resumable(G)
    assert refresher.metrics.refreshes.labels(outcome="cancelled")._value.get() == 1


async def test_a_new_entity_joins_the_community_most_of_its_neighbours_are_in(store: SqliteStore) -> None:
    entities, facts = cliques(G, [4, 4], bridges=0)
    load(store, entities, facts)
    refresher = CommunityRefresher(store, None)
    await refresher.refresh(G)
    first, second = entities[:4], entities[4:]
    newcomer = person(G, "newcomer")
    load(store, [newcomer], [link(G, newcomer, "knows", first[0]), link(G, newcomer, "knows", second[0]),
                             link(G, newcomer, "likes", second[1])])
    joined = await refresher.vote(G, [newcomer.id, second[0].id])
    theirs = (await store.community_of(G, [second[0].id]))[second[0].id]
    assert joined == {newcomer.id: theirs}
    assert refresher.metrics.votes.labels(outcome="joined")._value.get() == 1


async def test_two_refreshes_of_one_group_at_once_run_one_after_the_other(store: SqliteStore) -> None:
    entities, facts = cliques(G, [3, 4, 5], bridges=2)
    load(store, entities, facts)
    refresher = CommunityRefresher(store, None)
    outcomes = []

    async def one() -> None:
        outcomes.append(await refresher.refresh(G))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert sorted((o.edges, o.summaries) for o in outcomes) == [(len(facts), 0), (len(facts), 3)]


def graph_of(n: int, seed: int) -> tuple[list, list]:
    people = [person(G, f"p{i}") for i in range(n)]
    rng = random.Random(seed)
    chain = [link(G, people[i], "knows", people[(i * 7919 + rng.randrange(50)) % n]) for i in range(n)]
    return people, [f for f in {f.id: f for f in chain}.values() if f.subject_id != f.object_id]


async def test_propagation_in_a_child_process_finds_exactly_the_communities_a_thread_finds(
        store: SqliteStore, tmp_path: Path) -> None:
    entities, facts = cliques(G, [5, 6, 7, 8], bridges=3)
    people, chain = graph_of(3000, 11)
    load(store, [*entities, *people], [*facts, *chain])
    in_thread = SqliteStore(tmp_path / "thread.sqlite3")
    await in_thread.open()
    load(in_thread, [*entities, *people], [*facts, *chain])
    child = CommunityRefresher(store, HashEmbedder(), settings=RefreshSettings(propagation="process"))
    thread = CommunityRefresher(in_thread, HashEmbedder(), settings=RefreshSettings(propagation="thread"))
    by_child, by_thread = await child.refresh(G), await thread.refresh(G)
    assert child.propagator is not None and child.propagator.started == 1 and thread.propagator is None
    assert (by_child.communities, by_child.summaries) == (by_thread.communities, by_thread.summaries)
    assert by_child.communities > 4
    assert [(k.id, k.members, k.fingerprint, k.summary, k.embedding.tobytes()) for k in await store.communities(G)] == [
        (k.id, k.members, k.fingerprint, k.summary, k.embedding.tobytes()) for k in await in_thread.communities(G)]
    await child.aclose()
    await in_thread.close()


class Tagged:
    """A summariser other than the offline one (as the LLM's): its texts are made in this process."""

    name = "tagged"

    async def summarise(self, sketch: Sketch) -> str:
        return "tagged " + " / ".join(sketch.names)


class Unportable(HashEmbedder):
    """An embedder the child cannot rebuild (as the transformer): it embeds in this process; calls counted."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return super().embed(texts)


async def refreshed_in_both(store: SqliteStore, tmp_path: Path, **kw: Any) -> tuple[list, list]:
    """The stored communities of a refresh with propagation in the child and of one in a thread."""
    entities, facts = cliques(G, [3] * 150, bridges=20)
    load(store, entities, facts)
    in_thread = SqliteStore(tmp_path / "thread.sqlite3")
    await in_thread.open()
    load(in_thread, entities, facts)
    child = CommunityRefresher(store, settings=RefreshSettings(propagation="process"), **kw)
    await child.refresh(G)
    await CommunityRefresher(in_thread, settings=RefreshSettings(propagation="thread"), **kw).refresh(G)
    await child.aclose()
    rows = [[(k.id, k.summary, k.embedding.tobytes()) for k in await s.communities(G)] for s in (store, in_thread)]
    await in_thread.close()
    return rows[0], rows[1]


async def test_the_real_embedders_give_the_same_summary_vectors_in_the_child_and_in_a_thread(
        store: SqliteStore, tmp_path: Path, local_embedder: Embedder) -> None:
    """The static table is loaded in the child once built (portable); the transformer stays here, in slices."""
    await anyio.to_thread.run_sync(local_embedder.embed, ["the table is built here, not in the child"])
    assert (portable_spec(local_embedder) is not None) == isinstance(local_embedder, StaticEmbedder)
    by_child, by_thread = await refreshed_in_both(store, tmp_path, embedder=local_embedder)
    assert len(by_child) > 100 and by_child == by_thread


async def test_texts_made_in_this_process_are_embedded_in_the_child_as_a_thread_embeds_them(
        store: SqliteStore, tmp_path: Path) -> None:
    by_child, by_thread = await refreshed_in_both(store, tmp_path, embedder=HashEmbedder(), summariser=Tagged())
    assert len(by_child) > 100 and all(summary.startswith("tagged ") for _, summary, _ in by_child)
    assert by_child == by_thread


async def test_an_embedder_the_child_cannot_load_embeds_here_in_slices_as_a_thread_does(
        store: SqliteStore, tmp_path: Path) -> None:
    embedder = Unportable()
    by_child, by_thread = await refreshed_in_both(store, tmp_path, embedder=embedder)
    assert by_child == by_thread and len(by_child) > EMBED_SLICE
    assert max(embedder.calls) == EMBED_SLICE and sum(embedder.calls) == 2 * len(by_child)


async def test_communities_are_written_in_transactions_of_write_chunk(store: SqliteStore) -> None:
    entities, facts = cliques(G, [3] * 25, bridges=0)
    load(store, entities, facts)
    writes: list[tuple[int, int]] = []
    write = store.write_communities

    async def counted(group_id: GroupId, put: Sequence, drop: Sequence, at: datetime) -> None:
        writes.append((len(put), len(drop)))
        await write(group_id, put, drop, at)

    store.write_communities = counted  # type: ignore[method-assign]
    await CommunityRefresher(store, None, settings=RefreshSettings(write_chunk=10, propagation="thread")).refresh(G)
    assert writes == [(10, 0), (10, 0), (5, 0)] and len(await store.communities(G)) == 25
    writes.clear()
    for fact in facts[:3 * 12]:  # twelve of the triangles gone: their communities are dropped
        await store.delete_fact(G, fact.id)
    await CommunityRefresher(store, None, settings=RefreshSettings(write_chunk=10, propagation="thread")).refresh(G)
    assert writes == [(0, 10), (0, 2), (0, 0)] and len(await store.communities(G)) == 13


async def test_the_propagation_child_runs_at_the_configured_niceness(store: SqliteStore) -> None:
    entities, facts = cliques(G, [4, 5], bridges=1)
    load(store, entities, facts)
    refresher = CommunityRefresher(store, None, settings=RefreshSettings(child_nice=7))
    await refresher.refresh(G)
    assert refresher.propagator is not None and refresher.propagator.pid is not None
    assert os.getpriority(os.PRIO_PROCESS, refresher.propagator.pid) == os.getpriority(os.PRIO_PROCESS, 0) + 7
    await refresher.aclose()


async def test_a_child_process_refresh_out_of_time_resumes_to_the_same_communities(
        store: SqliteStore, tmp_path: Path) -> None:
    people, chain = graph_of(20_000, 3)
    load(store, people, chain)
    sliced = CommunityRefresher(store, None, settings=RefreshSettings(time_budget_s=0.0, max_iterations=50))
    slices = 1
    while not (await sliced.refresh(G)).finished:
        slices += 1
    assert slices > 1 and sliced.propagator is not None and sliced.propagator.started == 1
    in_one = SqliteStore(tmp_path / "one.sqlite3")
    await in_one.open()
    load(in_one, people, chain)
    await CommunityRefresher(in_one, None, settings=RefreshSettings(max_iterations=50, propagation="thread")).refresh(G)
    assert [k.members for k in await store.communities(G)] == [k.members for k in await in_one.communities(G)]
    await sliced.aclose()
    await in_one.close()


async def test_cancelling_a_refresh_kills_its_child_process_and_the_next_refresh_starts_a_new_one(
        store: SqliteStore) -> None:
    people, chain = graph_of(20_000, 3)
    load(store, people, chain)
    refresher = CommunityRefresher(store, None, settings=RefreshSettings(max_iterations=10_000))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(refresher.refresh, G)
            while refresher.propagator is None or refresher.propagator.pid is None:
                await anyio.sleep(0.01)
            pid = refresher.propagator.pid
            tg.cancel_scope.cancel()
    assert refresher.propagator.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped
    assert await store.communities(G) == []
    assert refresher.metrics.refreshes.labels(outcome="cancelled")._value.get() == 1
    refresher.settings = RefreshSettings(max_iterations=5)
    assert (await refresher.refresh(G)).finished
    assert refresher.propagator.started == 2 and await store.communities(G) != []
    await refresher.aclose()


def named_graph(group: GroupId, n: int, seed: int) -> tuple[list, list]:
    """A sparse random graph of named people with ingestion's ids (digests that include the group)."""
    rng = random.Random(seed)
    people = [replace(person(group, f"p{i}"), id=entity_id_for(group, f"p{i}")) for i in range(n)]
    pairs = {tuple(sorted((rng.randrange(n), rng.randrange(n)))) for _ in range(n)}
    facts = [replace(link(group, people[a], "knows", people[b]), id=f"{group}:{a}:{b}") for a, b in sorted(pairs) if a != b]
    return people, facts


async def partition(store: SqliteStore, group: GroupId, people: list) -> set[frozenset[str]]:
    await CommunityRefresher(store, None, settings=RefreshSettings(propagation="thread")).refresh(group)
    name = {p.id: p.canonical_name for p in people}
    return {frozenset(name[m] for m in k.members) for k in await store.communities(group)}


async def test_the_same_facts_in_two_groups_give_the_same_partition(store: SqliteStore) -> None:
    found = []
    for group in (GroupId("user_upkeep"), GroupId("user_elsewhere")):
        people, facts = named_graph(group, 400, 5)
        load(store, people, facts)
        found.append(await partition(store, group, people))
    assert len(found[0]) > 20 and found[0] == found[1]


def test_a_static_table_not_built_yet_is_not_handed_to_the_child(tmp_path: Path) -> None:
    """The child would build it (minutes, at its low priority) and its summaries job would time out."""
    assert portable_spec(StaticEmbedder("all-MiniLM-L6-v2-int8", tmp_path)) is None
    assert portable_spec(HashEmbedder()) == ("hash", "", "")
