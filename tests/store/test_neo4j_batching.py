"""The Neo4j write transaction queues writes and sends them in one statement, yet reads its own writes.

Round trips are what an episode costs on Neo4j (each is a network hop), so the
count is part of the specification: one per read the engine makes, one for the
episode row, one flush and the commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest

from mnemobus.errors import StoreIntegrityError
from mnemobus.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore
from test_conformance import T0, entity, episode, fact, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def test_an_episode_costs_one_round_trip_per_read_plus_three(neo: Neo4jStore, group: GroupId) -> None:
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
        reads = 3 + 2
        assert tx.round_trips == 1 + reads  # nothing queued could change those reads: no flush yet
    assert tx.round_trips == 1 + reads + 1  # the one flush (the commit is the last, uncounted, message)
    assert len(await neo.get_entities(group, [p.id for p in people])) == 3
    assert await neo.count_facts(group) == 2


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
