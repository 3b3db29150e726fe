"""A write transaction that waits for a lock behind another writer reads what that writer committed, and leaves it.

The group lock (store/neo4j/cypher.py LOCK_GROUPS) and the erasure check (erasure.py HOLD_ERASURES) take a node's
write lock to read its value under it. Each test makes the second transaction really wait: the server lists it
as blocked (SHOW TRANSACTIONS) before the first commits.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Prefetch
from mnemobus.store.erasures import GroupErased
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.neo4j.cypher import VERSION_QUERY
from mnemobus.store.neo4j.erasure import COUNT_ERASURE
from mnemobus.store.neo4j.rows import run_rows
from test_conformance import entity, episode, put  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def _version(store: Neo4jStore, group: GroupId) -> int:
    return int((await store._read(lambda tx: run_rows(tx, VERSION_QUERY, {"g": group})))[0]["v"])


async def _until_blocked(store: Neo4jStore, param: str, group: GroupId) -> None:
    """Until the server lists a transaction of the group (its statement's `param` names it) waiting for a lock."""
    def waiting(rows: list[dict[str, Any]]) -> bool:
        return any(str(r["status"]).startswith("Blocked") and group in ((r["parameters"] or {}).get(param) or [])
                   for r in rows)

    with anyio.fail_after(30):
        while not waiting(await store._read(lambda tx: run_rows(
                tx, "SHOW TRANSACTIONS YIELD status, parameters RETURN status, parameters"))):
            await anyio.sleep(0.05)


async def test_a_group_lock_taken_behind_another_writers_commit_reads_its_version_and_keeps_it(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    await put(neo, episodes=[episode(group, "m0", "the group's first turn")])
    before = await _version(neo, group)
    flushed, commit = anyio.Event(), anyio.Event()
    seen: dict[str, tuple[str | None, int]] = {}

    async def first() -> None:
        async with neo.transaction() as tx:
            await tx.entity_by_alias(group, "carol")  # the group's lock
            await tx.insert_entity(entity(group, "Carol"), None)
            await tx.flush()  # the version moved, not yet committed
            flushed.set()
            await commit.wait()

    async def second() -> None:
        async with other.transaction() as tx:
            await tx.entity_by_alias(group, "dave")  # waits for the first's commit
            seen.update(tx.versions)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await flushed.wait()
            tg.start_soon(second)
            await _until_blocked(neo, "groups", group)
            commit.set()
    assert seen[group][1] == before + 1  # what the first committed, not what stood before it
    assert await _version(neo, group) == before + 1  # and the second's lock did not put the old version back


async def test_a_write_that_waited_behind_an_erasures_count_is_refused_and_the_count_stays(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    await put(neo, episodes=[episode(group, "m0", "the group's first turn")])
    (before,) = (await neo.erasure_counts([group])).values()
    refused: list[BaseException] = []

    async def write() -> None:
        try:
            async with other.transaction() as tx:
                await tx.check_not_erased(group, before)  # waits for the erasure's commit
        except GroupErased as exc:
            refused.append(exc)

    with anyio.fail_after(60):
        async with neo._open_driver().session(database=neo.database) as s:
            erasing = await s.begin_transaction()
            await run_rows(erasing, COUNT_ERASURE, {"gs": [group]})  # an erasure's first step, not yet committed
            async with anyio.create_task_group() as tg:
                tg.start_soon(write)
                await _until_blocked(neo, "gs", group)
                await erasing.commit()
    assert len(refused) == 1
    assert await neo.erasure_counts([group]) == {group: before + 1}


async def test_a_batch_that_waited_for_a_version_node_an_erasure_deleted_is_dropped_with_the_group_and_said(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    # the lock then read the deleted node's version as null and the batch failed with a TypeError (seen when a
    # test's teardown erased its group under a worker's batch): now the batch runs again and meets the erasure
    await put(neo, episodes=[episode(group, "m0", "the group's first turn")])
    seen = await other.erasure_counts([group])
    late = episode(group, "m1", "said while the group was erased")
    told: list[str] = []
    other.observe_deadlocks(told.append)  # the process's mnemobus_store_deadlocks_total{outcome} (kernel/app.py)

    async def store_late(tx: Any) -> bool:
        await tx.check_not_erased(group, seen[group])
        return await tx.insert_episode(late, screened=False, embedding=None)

    with anyio.fail_after(60):
        async with neo._open_driver().session(database=neo.database) as s:
            erasing = await s.begin_transaction()
            # an erasure's steps, not yet committed: the version node locked, counted, deleted with the group's rows
            await run_rows(erasing, "MATCH (gv:GroupVersion {group_id: $g}) SET gv.locked_at = datetime()", {"g": group})
            async with anyio.create_task_group() as tg:
                outcome: list[Any] = []
                tg.start_soon(lambda: _into(outcome, other.run_transactions([store_late], Prefetch(episodes=((group, late.id),)))))
                await _until_blocked(neo, "groups", group)
                await run_rows(erasing, COUNT_ERASURE, {"gs": [group]})
                await run_rows(erasing, "MATCH (n:Episode {group_id: $g}) DETACH DELETE n", {"g": group})
                await run_rows(erasing, "MATCH (gv:GroupVersion {group_id: $g}) DELETE gv", {"g": group})
                await erasing.commit()
    assert [type(o) for o in outcome[0]] == [GroupErased]
    assert await neo.count_episodes(group) == 0
    assert told == ["erased_meanwhile"]  # a lost lock race, not a deadlock


async def _into(out: list[Any], work: Any) -> None:
    out.append(await work)
