"""Erasing groups on the real local Neo4j is all or nothing (store/neo4j/erasure.py): a fault part-way leaves
every group whole when they fit in one transaction, and a journalled erasure cut short is finished by the next
erasure or the next open of the store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from neo4j import exceptions as nx

from mnemobus.shared.errors import StoreUnavailable
from mnemobus.shared.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore, erasure
from mnemobus.store.neo4j.rows import run_rows
from test_conformance import alice_graph  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def _rows(store: Neo4jStore, group: GroupId) -> tuple[int, int, int]:
    """(episodes, entities, facts) of the group, as the server holds them."""
    return (await store.count_episodes(group), len((await store.export_group(group)).entities),
            await store.count_facts(group))


def _fault_on_episodes_of(monkeypatch: pytest.MonkeyPatch, group: GroupId) -> list[int]:
    """The server connection drops (ServiceUnavailable) whenever an erasure deletes `group`'s episodes: the
    statements before it in the transaction ran on the server, and the server rolls them back."""
    real = erasure.run_rows
    hits: list[int] = []

    async def faulty(tx: Any, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        if query.startswith("MATCH (n:Episode") and (params or {}).get("g") == group:
            hits.append(1)
            raise nx.ServiceUnavailable("connection lost (injected)")
        return await real(tx, query, params)

    monkeypatch.setattr(erasure, "run_rows", faulty)
    return hits


async def test_a_fault_part_way_through_erasing_several_groups_leaves_every_group_whole(
        neo4j_uri: str, new_group: Callable[[str], GroupId], monkeypatch: pytest.MonkeyPatch) -> None:
    groups = [new_group("whole") for _ in range(3)]
    store = Neo4jStore(neo4j_uri, max_retry_time_s=0.2)
    await store.open()
    try:
        for g in groups:
            await alice_graph(store, g)
        before = [await _rows(store, g) for g in groups]
        hits = _fault_on_episodes_of(monkeypatch, groups[-1])
        with pytest.raises(StoreUnavailable):
            await store.delete_groups(groups)
        assert hits  # the fault struck after the first groups' rows had been deleted in the transaction
        assert [await _rows(store, g) for g in groups] == before == [(1, 5, 4)] * 3
        monkeypatch.undo()
        done = await store.delete_groups(groups)
        assert (done.episodes, done.entities, done.facts) == (3, 15, 12)
        assert [await _rows(store, g) for g in groups] == [(0, 0, 0)] * 3
    finally:
        await store.close()


async def _journals(store: Neo4jStore, groups: list[GroupId]) -> list[dict[str, Any]]:
    """The erasure journals naming any of these groups: id, groups, owner, and whether the lease ran out."""
    return await store._read(lambda tx: run_rows(tx, erasure.JOURNALS_NAMING, {"gs": groups}))


async def _until_lease_over(store: Neo4jStore, groups: list[GroupId]) -> None:
    """Wait (on the server's clock, which times leases) until no journal naming the groups is still owned."""
    with anyio.fail_after(60):
        while any(not j["expired"] for j in await _journals(store, groups)):
            await anyio.sleep(0.2)


# Not exclusive: stores opened meanwhile on other workers leave the journal alone while its lease lasts (5 s here,
# long enough for the checks of what was left); after that any of them may finish it, which ends as `again` would
async def test_a_journalled_erasure_cut_short_is_finished_by_the_next_open_once_its_owners_lease_runs_out(
        neo4j_uri: str, new_group: Callable[[str], GroupId], monkeypatch: pytest.MonkeyPatch) -> None:
    groups = [new_group("journal") for _ in range(2)]
    monkeypatch.setattr(erasure, "ONE_TXN_ROWS", 4)  # these groups are "too large" for one transaction
    monkeypatch.setattr(erasure, "DELETE_BATCH", 2)
    store = Neo4jStore(neo4j_uri, max_retry_time_s=0.2, erasure_lease_s=5.0)
    await store.open()
    try:
        for g in groups:
            await alice_graph(store, g)
        _fault_on_episodes_of(monkeypatch, groups[-1])
        with pytest.raises(StoreUnavailable):
            await store.delete_groups(groups)
        assert await _rows(store, groups[0]) == (0, 0, 0)
        assert (await _rows(store, groups[1]))[0] == 1  # part of it is left, and the journal names it
        (journal,) = await _journals(store, groups)
        assert journal["gs"] == [groups[1]] and journal["owner"] == store.erasure_owner
        await _until_lease_over(store, groups)
    finally:
        await store.close()
    monkeypatch.setattr(erasure, "run_rows", run_rows)  # the fault is gone
    again = Neo4jStore(neo4j_uri)
    await again.open()  # a restart: the erasure is finished before the store serves anything
    try:
        assert [await _rows(again, g) for g in groups] == [(0, 0, 0)] * 2
        assert await _journals(again, groups) == []
        # counted when journalled and again when finished: a write that started while it ran is refused too
        assert await again.erasure_counts(groups) == {g: 2 for g in groups}
    finally:
        await again.close()


async def test_a_journalled_erasure_whose_owner_is_still_at_it_is_left_to_it_by_another_stores_open(
        neo4j_uri: str, new_group: Callable[[str], GroupId], monkeypatch: pytest.MonkeyPatch,
        open_neo4j: Callable[..., Any]) -> None:
    groups = [new_group("owned") for _ in range(2)]
    monkeypatch.setattr(erasure, "ONE_TXN_ROWS", 4)
    monkeypatch.setattr(erasure, "DELETE_BATCH", 2)
    owner = Neo4jStore(neo4j_uri)
    await owner.open()
    try:
        for g in groups:
            await alice_graph(owner, g)
        paused, go, batches = anyio.Event(), anyio.Event(), []
        write = owner._write

        async def held_after_the_first_batch(fn: Any) -> Any:  # the owner alive, between two of its batches
            if getattr(fn, "__name__", "") == "batch":
                batches.append(fn)
                if len(batches) == 2:
                    paused.set()
                    await go.wait()
            return await write(fn)

        monkeypatch.setattr(owner, "_write", held_after_the_first_batch)
        counts: list[Any] = []
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                async def erase() -> None:
                    counts.append(await owner.delete_groups(groups))

                tg.start_soon(erase)
                await paused.wait()
                async with open_neo4j() as other:  # its open finishes the journals whose leases ran out
                    (journal,) = await _journals(other, groups)
                    assert journal["owner"] == owner.erasure_owner and not journal["expired"]
                    assert [(await _rows(other, g))[0] for g in groups] == [1, 1]  # nothing of it erased by other
                go.set()
        (done,) = counts
        assert (done.episodes, done.entities, done.facts) == (2, 10, 8)  # all of it counted by its owner: not split
        assert [await _rows(owner, g) for g in groups] == [(0, 0, 0)] * 2
        assert await _journals(owner, groups) == []
    finally:
        await owner.close()
