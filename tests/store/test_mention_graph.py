"""The mention graph graph recall spreads over (GraphStore.entity_links), on every backend (the `store` fixture).

Episodes link to the entities they mention in the episode's own write transaction; the links go with the
episode, its group, and never reach across groups.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from tests.store.test_conformance import T0, entity, episode, fact, vec

pytestmark = pytest.mark.anyio


async def three_turns(store: GraphStore, group: GroupId) -> dict[str, object]:
    """m1 and m3 mention Rex; m2 mentions Ana; one fact links Ana to Rex."""
    ana, rex = entity(group, "Ana"), entity(group, "Rex", kind="animal")
    eps = [episode(group, f"m{i}", text, at=T0 + timedelta(minutes=i))
           for i, text in enumerate(("Rex chased the ball", "Ana is home", "Rex slept all day"), start=1)]
    owns = fact(group, ana, "owns", rex, "Ana owns Rex", ep=eps[1], confidence=0.8)
    async with store.transaction() as tx:
        for ep in eps:
            await tx.insert_episode(ep, screened=False, embedding=vec(ep.content))
        for n in (ana, rex):
            await tx.insert_entity(n, vec(n.name))
        await tx.link_episode_entity(group, eps[0].id, rex.id)
        await tx.link_episode_entity(group, eps[1].id, ana.id)
        await tx.link_episode_entity(group, eps[2].id, rex.id)
        await tx.insert_fact(owns, vec(owns.fact))
    return {"ana": ana, "rex": rex, "eps": eps, "owns": owns}


async def test_entity_links_lists_the_episodes_that_mention_each_entity_newest_first(
        store: GraphStore, group: GroupId) -> None:
    g = await three_turns(store, group)
    rex, eps = g["rex"], g["eps"]
    links = await store.entity_links(group, [rex.id], as_of=T0 + timedelta(days=1), per_entity=10)
    assert links.mentions == ((rex.id, eps[2].id), (rex.id, eps[0].id))
    assert links.mention_degree == {rex.id: 2}


async def test_entity_links_gives_the_facts_touching_each_entity_with_their_other_end(
        store: GraphStore, group: GroupId) -> None:
    g = await three_turns(store, group)
    rex, ana, owns = g["rex"], g["ana"], g["owns"]
    links = await store.entity_links(group, [rex.id], as_of=T0 + timedelta(days=1), per_entity=10)
    assert links.facts == ((owns.id, rex.id, ana.id, pytest.approx(0.8)),)
    assert links.fact_degree == {rex.id: 1}


async def test_entity_links_caps_each_entity_but_counts_all_its_links(store: GraphStore, group: GroupId) -> None:
    g = await three_turns(store, group)
    links = await store.entity_links(group, [g["rex"].id], as_of=T0 + timedelta(days=1), per_entity=1)
    assert (links.mentions, links.mention_degree) == (((g["rex"].id, g["eps"][2].id),), {g["rex"].id: 2})


async def test_entity_links_leaves_out_episodes_said_after_as_of(store: GraphStore, group: GroupId) -> None:
    g = await three_turns(store, group)
    links = await store.entity_links(group, [g["rex"].id], as_of=T0 + timedelta(minutes=2), per_entity=10)
    assert links.mentions == ((g["rex"].id, g["eps"][0].id),)


async def test_entity_links_never_reach_into_another_group(
        store: GraphStore, group: GroupId, other_group: GroupId) -> None:
    g = await three_turns(store, group)
    links = await store.entity_links(other_group, [g["rex"].id, g["ana"].id], as_of=T0 + timedelta(days=1),
                                     per_entity=10)
    assert (links.mentions, links.facts) == ((), ())


async def test_deleting_an_episode_removes_its_mention_edges(store: GraphStore, group: GroupId) -> None:
    g = await three_turns(store, group)
    rex, eps = g["rex"], g["eps"]
    await store.delete_episode(group, eps[2].id)
    links = await store.entity_links(group, [rex.id], as_of=T0 + timedelta(days=1), per_entity=10)
    assert links.mentions == ((rex.id, eps[0].id),)


async def test_deleting_the_group_removes_every_mention_edge(store: GraphStore, group: GroupId) -> None:
    g = await three_turns(store, group)
    await store.delete_group(group)
    links = await store.entity_links(group, [g["rex"].id, g["ana"].id], as_of=T0 + timedelta(days=1), per_entity=10)
    assert (links.mentions, links.facts) == ((), ())


async def test_erasing_a_users_groups_removes_their_mention_edges(
        store: GraphStore, group: GroupId, other_group: GroupId) -> None:
    g = await three_turns(store, group)
    await store.delete_groups([group, other_group])
    links = await store.entity_links(group, [g["rex"].id], as_of=T0 + timedelta(days=1), per_entity=10)
    assert links.mentions == ()
