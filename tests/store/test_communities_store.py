"""The CommunityStore half of the conformance suite: each test runs on SQLite and on Neo4j (`store` fixture)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.communities import Community, CommunityStore, node_key
from mnemobus.store.contract import GraphStore

from tests.store.test_conformance import T0, alice_graph, entity, fact, put, vec

pytestmark = pytest.mark.anyio

AT = datetime(2026, 2, 1, tzinfo=UTC)


def community(group: GroupId, cid: str, members: list[str], summary: str = "") -> Community:
    return Community(id=f"{group}:{cid}", group_id=group, members=tuple(sorted(members)), fingerprint=f"fp-{cid}",
                     summary=summary or cid, embedding=vec(summary or cid), updated_at=AT)


async def test_both_stores_keep_communities(store: GraphStore) -> None:
    assert isinstance(store, CommunityStore)


async def test_active_edges_come_in_chunks_and_leave_out_ended_facts(store: GraphStore, group: GroupId) -> None:
    g = await alice_graph(store, group)
    a, b = entity(group, "Old"), entity(group, "Older")
    ended = fact(group, a, "knew", b, "Old knew Older", invalid_at=T0.replace(month=2))
    await put(store, entities=[a, b], facts=[ended])
    seen, cursor, chunks = [], None, 0
    while True:
        edges, cursor = await store.active_edges(group, cursor, 3)  # type: ignore[attr-defined]
        seen += edges
        chunks += 1
        if cursor is None:
            break
    assert chunks == 2
    assert sorted(e.fact_id for e in seen) == sorted(f.id for f in g["facts"])  # type: ignore[attr-defined]
    works = next(e for e in seen if e.fact_id.endswith(":works_at:acme"))
    assert (works.subject_id, works.object_id) == (g["alice"].id, g["acme"].id)  # type: ignore[attr-defined]


async def test_node_keys_come_in_chunks_with_each_entitys_canonical_name_and_type(store: GraphStore,
                                                                                  group: GroupId) -> None:
    g = await alice_graph(store, group)
    keys, cursor = await store.node_keys(group, None, 2)  # type: ignore[attr-defined]
    while cursor is not None:
        more, cursor = await store.node_keys(group, cursor, 2)  # type: ignore[attr-defined]
        assert not set(more) & set(keys)
        keys.update(more)
    alice = g["alice"]  # type: ignore[index]
    assert keys[alice.id] == node_key(alice.canonical_name, alice.type) and len(keys) == 5  # alice_graph: 5


async def test_written_communities_read_back_with_members_summary_and_vector(store: GraphStore, group: GroupId) -> None:
    g = await alice_graph(store, group)
    ids = {k: g[k].id for k in ("alice", "acme", "coffee", "berlin", "germany")}  # type: ignore[attr-defined]
    work = community(group, "work", [ids["alice"], ids["acme"], ids["coffee"]], "Alice works at Acme")
    place = community(group, "place", [ids["berlin"], ids["germany"]], "Berlin is in Germany")
    await store.write_communities(group, [work, place], [], AT)  # type: ignore[attr-defined]
    got = {k.id: k for k in await store.communities(group)}  # type: ignore[attr-defined]
    assert got[work.id].members == work.members and got[work.id].fingerprint == "fp-work"
    assert got[place.id].summary == "Berlin is in Germany" and got[place.id].updated_at == AT
    assert float(got[place.id].embedding @ vec("Berlin is in Germany")) == pytest.approx(1.0, abs=1e-5)
    assert await store.community_of(group, [ids["alice"], ids["berlin"], "nobody"]) == {  # type: ignore[attr-defined]
        ids["alice"]: work.id, ids["berlin"]: place.id}


async def test_community_members_reads_the_members_of_the_named_communities_of_the_group_only(
        store: GraphStore, group: GroupId, other_group: GroupId) -> None:
    g = await alice_graph(store, group)
    alice, acme, coffee = g["alice"].id, g["acme"].id, g["coffee"].id  # type: ignore[attr-defined]
    first, second = community(group, "one", [acme, alice]), community(group, "two", [coffee])
    await store.write_communities(group, [first, second], [], AT)  # type: ignore[attr-defined]
    got = await store.community_members(group, [first.id, "no such community"])  # type: ignore[attr-defined]
    assert got == {first.id: tuple(sorted([alice, acme]))}
    assert await store.community_members(other_group, [first.id, second.id]) == {}  # type: ignore[attr-defined]


async def test_putting_an_entity_in_a_community_takes_it_out_of_another_and_drop_removes(
        store: GraphStore, group: GroupId) -> None:
    g = await alice_graph(store, group)
    alice, acme, coffee = g["alice"].id, g["acme"].id, g["coffee"].id  # type: ignore[attr-defined]
    first, second = community(group, "one", [alice, acme]), community(group, "two", [coffee])
    await store.write_communities(group, [first, second], [], AT)  # type: ignore[attr-defined]
    await store.write_communities(group, [replace(second, members=tuple(sorted([coffee, acme])))], [], AT)  # type: ignore[attr-defined]
    got = {k.id: k.members for k in await store.communities(group)}  # type: ignore[attr-defined]
    assert got == {first.id: (alice,), second.id: tuple(sorted([coffee, acme]))}
    await store.write_communities(group, [], [first.id], AT)  # type: ignore[attr-defined]
    assert [k.id for k in await store.communities(group)] == [second.id]  # type: ignore[attr-defined]


async def test_an_entity_joins_a_stored_community_and_not_a_missing_one(store: GraphStore, group: GroupId) -> None:
    g = await alice_graph(store, group)
    alice, acme, coffee = g["alice"].id, g["acme"].id, g["coffee"].id  # type: ignore[attr-defined]
    await store.write_communities(group, [community(group, "one", [alice, acme])], [], AT)  # type: ignore[attr-defined]
    assert await store.join_community(group, f"{group}:one", coffee)  # type: ignore[attr-defined]
    assert not await store.join_community(group, f"{group}:gone", coffee)  # type: ignore[attr-defined]
    assert (await store.communities(group))[0].members == tuple(sorted([alice, acme, coffee]))  # type: ignore[attr-defined]
    assert (await store.graph_stats(group)).largest_community == 3  # type: ignore[attr-defined]


async def test_a_group_holds_communities_only_once_some_are_written_and_not_another_groups(
        store: GraphStore, group: GroupId) -> None:
    g = await alice_graph(store, group)
    assert not await store.has_communities(group)  # type: ignore[attr-defined]
    await store.write_communities(group, [community(group, "one", [g["alice"].id, g["acme"].id])], [], AT)  # type: ignore[attr-defined]
    assert await store.has_communities(group)  # type: ignore[attr-defined]
    assert not await store.has_communities(GroupId(f"{group}_other"))  # type: ignore[attr-defined]


async def test_community_vector_search_ranks_the_nearest_summary_first(store: GraphStore, group: GroupId) -> None:
    g = await alice_graph(store, group)
    await store.write_communities(group, [  # type: ignore[attr-defined]
        community(group, "coffee", [g["coffee"].id], "strong coffee and espresso"),  # type: ignore[attr-defined]
        community(group, "geo", [g["berlin"].id], "Berlin part of Germany")], [], AT)  # type: ignore[attr-defined]
    hits = await store.search_communities_vector(group, vec("Berlin part of Germany"), 2)  # type: ignore[attr-defined]
    assert [h.id for h in hits] == [f"{group}:geo", f"{group}:coffee"]


async def test_graph_stats_counts_entities_facts_communities_and_the_last_refresh(
        store: GraphStore, group: GroupId) -> None:
    g = await alice_graph(store, group)
    a, b = entity(group, "Old"), entity(group, "Older")
    await put(store, entities=[a, b], facts=[fact(group, a, "knew", b, "Old knew Older", invalid_at=T0.replace(month=2))])
    before = await store.graph_stats(group)  # type: ignore[attr-defined]
    assert (before.entities, before.active_facts, before.ended_facts, before.communities, before.last_refresh,
            before.evicted) == (7, 4, 1, 0, None, 0)
    await store.write_communities(group, [community(group, "one", [g["alice"].id, g["acme"].id])], [], AT)  # type: ignore[attr-defined]
    after = await store.graph_stats(group)  # type: ignore[attr-defined]
    assert (after.communities, after.largest_community, after.last_refresh) == (1, 2, AT)


async def test_communities_stay_in_their_group_and_go_with_it(store: GraphStore, group: GroupId,
                                                              other_group: GroupId) -> None:
    g = await alice_graph(store, group)
    await alice_graph(store, other_group)
    await store.write_communities(group, [community(group, "one", [g["alice"].id])], [], AT)  # type: ignore[attr-defined]
    assert await store.communities(other_group) == []  # type: ignore[attr-defined]
    assert await store.community_of(other_group, [g["alice"].id]) == {}  # type: ignore[attr-defined]
    await store.delete_group(group)
    assert await store.communities(group) == []  # type: ignore[attr-defined]
    assert (await store.graph_stats(group)).last_refresh is None  # type: ignore[attr-defined]
