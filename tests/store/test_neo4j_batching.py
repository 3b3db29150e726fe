"""The Neo4j write transaction queues writes and sends them in one statement, yet reads its own writes.

Round trips are what an episode costs on Neo4j (each is a network hop), so the
count is part of the specification: one to lock the group, one per key read the
first time, one flush and the commit; a batch that names its reads up front
(Prefetch) costs the lock, one read and the flush however many episodes it holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest

from mnemobus.shared.errors import StoreIntegrityError
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Prefetch, WriteTxn
from mnemobus.store.neo4j import Neo4jStore
from test_conformance import T0, entity, episode, fact, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def test_an_episode_costs_a_lock_one_round_trip_per_read_and_a_flush(neo: Neo4jStore, group: GroupId) -> None:
    ep = episode(group, "m1", "Alice and Bob met Carol")
    people = [entity(group, n) for n in ("Alice", "Bob", "Carol")]
    async with neo.transaction() as tx:
        await tx.insert_episode(ep, screened=False, embedding=vec(ep.content))
        for p in people:
            assert await tx.entity_by_alias(group, p.canonical_name) is None
            await tx.insert_entity(p, vec(p.name))
            await tx.link_episode_entity(group, ep.id, p.id)
        for s, o in zip(people, people[1:], strict=False):
            assert await tx.facts_between(group, s.id, "knows") == []
            await tx.insert_fact(fact(group, s, "knows", o, f"{s.name} knows {o.name}", ep=ep), vec("k"))
        reads = 1 + 3  # the episode id and the names; the chains of entities created here need no read
        assert tx.round_trips == 1 + reads  # the lock, then each read once; nothing was flushed for them
        for p in people:  # read again after this transaction's own writes: answered in process
            assert (await tx.entity_by_alias(group, p.canonical_name)).id == p.id  # type: ignore[union-attr]
        assert [f.object_id for f in await tx.facts_between(group, people[0].id, "knows")] == [people[1].id]
        assert tx.round_trips == 1 + reads
    assert tx.round_trips == 1 + reads + 1  # the one flush (the commit is the last, uncounted, message)
    assert len(await neo.get_entities(group, [p.id for p in people])) == 3
    assert await neo.count_facts(group) == 2


def _mentions(group: GroupId, i: int) -> Callable[[WriteTxn], object]:
    """Episode i of a batch: names Alice (stored before the batch) and a new person, and a fact between them."""
    ep = episode(group, f"m{i}", f"Alice met Person{i}")
    new = entity(group, f"Person{i}")

    async def work(tx: WriteTxn) -> None:
        assert await tx.insert_episode(ep, screened=False, embedding=None)
        alice = await tx.entity_by_alias(group, "alice")
        assert alice is not None and await tx.entity_by_alias(group, new.canonical_name) is None
        await tx.observe_entity(group, alice.id, name="Alice", alias="alice", seen=ep.reference_time)
        await tx.insert_entity(new, None)
        chain = await tx.facts_between(group, alice.id, "met")
        assert len(chain) == i  # every earlier episode of the batch added one
        await tx.insert_fact(fact(group, alice, "met", new, f"Alice met {new.name}", ep=ep), None)

    return work


async def test_a_batch_that_names_its_reads_costs_three_round_trips(neo: Neo4jStore, group: GroupId) -> None:
    async with neo.transaction() as tx:
        await tx.insert_entity(entity(group, "Alice"), None)
    n = 8
    ahead = Prefetch(episodes=tuple((group, episode(group, f"m{i}", "").id) for i in range(n)),
                     aliases=((group, "alice"), *((group, f"person{i}") for i in range(n))),
                     chains=((group, "alice", "met"),))
    trips: list[int] = []
    real = neo._write_txn

    def counting():  # type: ignore[no-untyped-def]
        cm = real()

        class Watch:
            async def __aenter__(self):  # type: ignore[no-untyped-def]
                self.tx = await cm.__aenter__()
                return self.tx

            async def __aexit__(self, *exc):  # type: ignore[no-untyped-def]
                try:
                    return await cm.__aexit__(*exc)
                finally:
                    trips.append(self.tx.round_trips)

        return Watch()

    neo._write_txn = counting  # type: ignore[method-assign]
    out = await neo.run_transactions([_mentions(group, i) for i in range(n)], ahead)
    assert out == [None] * n
    assert trips == [3]  # lock, prefetch, flush: no read of any of the eight episodes went to the server
    assert await neo.count_episodes(group) == n and await neo.count_facts(group) == n


async def test_a_read_sees_queued_writes_that_change_its_answer(neo: Neo4jStore, group: GroupId) -> None:
    bob = entity(group, "Robert")
    async with neo.transaction() as tx:
        await tx.insert_entity(bob, vec("Robert"))
        await tx.observe_entity(group, bob.id, name="Bob", alias="bob", seen=T0 + timedelta(days=1))
        found = await tx.entity_by_alias(group, "bob")  # the alias exists only in the queue
        assert found is not None and (found.id, found.name, found.aliases) == (bob.id, "Bob", ("bob", "robert"))
        await tx.observe_entity(group, bob.id, name="Bobby", alias="bobby", seen=T0 + timedelta(days=2))
        again = await tx.entity_by_alias(group, "robert")  # a stored alias, but its entity has a queued change
        assert again is not None and again.name == "Bobby"


async def test_a_fact_chain_read_sees_a_queued_fact_and_update(neo: Neo4jStore, group: GroupId) -> None:
    alice, acme, globex = entity(group, "Alice"), entity(group, "Acme"), entity(group, "Globex")
    old = fact(group, alice, "works_at", acme, "Alice works at Acme")
    async with neo.transaction() as tx:
        for e in (alice, acme, globex):
            await tx.insert_entity(e, None)
        await tx.insert_fact(old, None)
        assert [f.id for f in await tx.facts_between(group, alice.id, "works_at")] == [old.id]
        await tx.update_fact(type(old)(**{**{s: getattr(old, s) for s in type(old).__slots__},  # type: ignore[attr-defined]
                                          "invalid_at": T0 + timedelta(days=3)}))
        (chain,) = await tx.facts_between(group, alice.id, "works_at")
        assert chain.invalid_at == T0 + timedelta(days=3)


async def test_a_refused_queued_write_rolls_back_the_whole_episode(neo: Neo4jStore, group: GroupId) -> None:
    alice, ghost = entity(group, "Alice"), entity(group, "Ghost")
    ep = episode(group, "m1", "Alice knows a ghost")
    with pytest.raises(StoreIntegrityError, match="not an entity of group"):
        async with neo.transaction() as tx:
            await tx.insert_episode(ep, screened=False, embedding=None)
            await tx.insert_entity(alice, None)
            await tx.insert_fact(fact(group, alice, "knows", ghost, "Alice knows a ghost"), None)
    assert await neo.get_episode(group, ep.id) is None
    assert await neo.get_entities(group, [alice.id]) == []


async def test_concurrent_transactions_on_one_store_all_commit(neo: Neo4jStore, group: GroupId) -> None:
    """What the engine's ingest_many may do: several episodes' transactions started at once."""

    async def one(i: int) -> None:
        ep = episode(group, f"m{i}", f"message {i} about Alice")
        async with neo.transaction() as tx:
            await tx.insert_episode(ep, screened=False, embedding=None)
            found = await tx.entity_by_alias(group, "alice")
            if found is None:
                await tx.insert_entity(entity(group, "Alice"), None)
            else:
                await tx.observe_entity(group, found.id, name="Alice", alias="alice", seen=ep.reference_time)
            await tx.link_episode_entity(group, ep.id, f"{group}:alice")

    await asyncio.gather(*(one(i) for i in range(6)))
    assert await neo.count_episodes(group) == 6
    assert [e.id for e in await neo.get_entities(group, [f"{group}:alice"])] == [f"{group}:alice"]
