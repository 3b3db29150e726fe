"""Neo4j `run_transactions`: a batch of works in one transaction, each work atomic on its own.

Neo4j has no savepoints, so what the contract asks (one work's failure keeps only
that work out) is met by dropping a failed work's queued rows, or by rolling the
batch back and running its works one by one. Either way the slots must read the
same: successes stored, failures alone and nothing of them kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from mnemobus.shared.errors import StoreIntegrityError
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import BatchTransactions, WriteTxn
from mnemobus.store.neo4j import Neo4jStore
from test_conformance import entity, episode, fact, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio

Work = Callable[[WriteTxn], Awaitable[str]]


def stores_episode(group: GroupId, msg: str, person: str) -> Work:
    """An episode mentioning a person, who is created on first mention and observed after (as ingestion does)."""
    ep = episode(group, msg, f"{msg}: a message about {person}")

    async def work(tx: WriteTxn) -> str:
        await tx.insert_episode(ep, screened=False, embedding=vec(ep.content))
        found = await tx.entity_by_alias(group, person.lower())
        if found is None:
            await tx.insert_entity(entity(group, person), vec(person))
        else:
            await tx.observe_entity(group, found.id, name=person, alias=person.lower(), seen=ep.reference_time)
        await tx.link_episode_entity(group, ep.id, f"{group}:{person.lower()}")
        return ep.id

    return work


def fails_after(inner: Work, *, flush_first: bool = False) -> Work:
    """The inner work's writes, then an error (after making them reach the server, when flush_first)."""

    async def work(tx: WriteTxn) -> str:
        await inner(tx)
        if flush_first:
            await tx.flush()  # type: ignore[attr-defined]  # what a read that could see the queue does
        raise ValueError("extraction went wrong")

    return work


async def _stored(neo: Neo4jStore, group: GroupId, msgs: list[str]) -> list[str]:
    ids = [episode(group, m, "").id for m in msgs]
    return [e.id for e in await neo.get_episodes(group, ids)]


async def test_the_neo4j_store_offers_batches(neo: Neo4jStore) -> None:
    assert isinstance(neo, BatchTransactions)


async def test_a_batch_stores_every_work_and_later_works_see_earlier_ones(neo: Neo4jStore, group: GroupId) -> None:
    out = await neo.run_transactions([stores_episode(group, f"m{i}", "Alice") for i in range(4)])
    assert out == [episode(group, f"m{i}", "").id for i in range(4)]
    assert await neo.count_episodes(group) == 4
    (alice,) = await neo.get_entities(group, [f"{group}:alice"])  # created once, then observed three times
    assert alice.name == "Alice"


async def test_a_work_failing_before_anything_was_sent_loses_only_itself(neo: Neo4jStore, group: GroupId) -> None:
    works = [stores_episode(group, "m0", "Alice"), fails_after(stores_episode(group, "m1", "Bob")),
             stores_episode(group, "m2", "Carol")]
    out = await neo.run_transactions(works)
    assert isinstance(out[1], ValueError) and not isinstance(out[0], Exception) and not isinstance(out[2], Exception)
    assert await _stored(neo, group, ["m0", "m1", "m2"]) == [episode(group, "m0", "").id, episode(group, "m2", "").id]
    assert await neo.get_entities(group, [f"{group}:bob"]) == []


async def test_a_work_failing_after_its_rows_were_sent_loses_only_itself(neo: Neo4jStore, group: GroupId) -> None:
    works = [stores_episode(group, "m0", "Alice"), fails_after(stores_episode(group, "m1", "Bob"), flush_first=True),
             stores_episode(group, "m2", "Carol")]
    out = await neo.run_transactions(works)
    assert isinstance(out[1], ValueError)
    assert await _stored(neo, group, ["m0", "m1", "m2"]) == [episode(group, "m0", "").id, episode(group, "m2", "").id]
    assert await neo.get_entities(group, [f"{group}:bob"]) == []


async def test_a_work_the_server_refuses_loses_only_itself(neo: Neo4jStore, group: GroupId) -> None:
    alice, ghost = entity(group, "Alice"), entity(group, "Ghost")

    async def dangling_fact(tx: WriteTxn) -> str:
        await tx.insert_episode(episode(group, "m1", "Alice knows a ghost"), screened=False, embedding=None)
        await tx.insert_fact(fact(group, alice, "knows", ghost, "Alice knows a ghost"), None)  # Ghost was never stored
        return "m1"

    out = await neo.run_transactions([stores_episode(group, "m0", "Alice"), dangling_fact,
                                      stores_episode(group, "m2", "Carol")])
    assert isinstance(out[1], StoreIntegrityError)
    assert await _stored(neo, group, ["m0", "m1", "m2"]) == [episode(group, "m0", "").id, episode(group, "m2", "").id]
    assert await neo.count_facts(group) == 0


async def test_an_episode_twice_in_one_batch_is_stored_once(neo: Neo4jStore, group: GroupId) -> None:
    ep = episode(group, "m0", "said twice")

    async def insert(tx: WriteTxn) -> bool:
        return await tx.insert_episode(ep, screened=False, embedding=None)

    assert await neo.run_transactions([insert, insert]) == [True, False]
    assert await neo.count_episodes(group) == 1


def loses_a_deadlock_once(inner: Work, *, after_calls: int) -> Work:
    """The inner work, whose transaction the server picks as a deadlock's victim once, on call `after_calls` + 1."""
    from neo4j import exceptions as nx

    from mnemobus.shared.errors import StoreUnavailable

    calls = 0

    async def work(tx: WriteTxn) -> str:
        nonlocal calls
        calls += 1
        if calls == after_calls + 1:
            victim = nx.Neo4jError._hydrate_neo4j(code="Neo.TransientError.Transaction.DeadlockDetected",
                                                  message="ForsetiClient can't acquire ExclusiveLock")
            raise StoreUnavailable("Neo4j write failed, nothing stored: TransientError") from victim
        return await inner(tx)

    return work


async def test_a_work_running_alone_after_a_split_is_run_again_when_it_loses_a_deadlock(
    neo: Neo4jStore, group: GroupId
) -> None:
    """Noticed in parallel runs: the batch was retried after a lost deadlock, but a work re-run alone after the batch
    split was not, and failed its episode back to the worker."""
    works = [stores_episode(group, "m0", "Alice"), fails_after(stores_episode(group, "m1", "Bob"), flush_first=True),
             loses_a_deadlock_once(stores_episode(group, "m2", "Carol"), after_calls=0)]  # the batch split at m1
    out = await neo.run_transactions(works)
    assert isinstance(out[1], ValueError) and out[2] == episode(group, "m2", "").id
    assert await _stored(neo, group, ["m0", "m1", "m2"]) == [episode(group, "m0", "").id, episode(group, "m2", "").id]


async def test_a_batch_that_loses_a_deadlock_is_run_again_whole(neo: Neo4jStore, group: GroupId) -> None:
    works = [stores_episode(group, "m0", "Alice"), loses_a_deadlock_once(stores_episode(group, "m1", "Bob"), after_calls=0)]
    assert await neo.run_transactions(works) == [episode(group, "m0", "").id, episode(group, "m1", "").id]
    assert await neo.count_episodes(group) == 2
