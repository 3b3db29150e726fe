"""Neo4j group mirrors: vector search and walks answered in process, never behind what Neo4j holds.

Each test keeps one store's mirror warm (`preload`) and writes through a second
store on the same server, which is what another process does: the first store's
answers must include the second's committed writes. Answers are compared with a
store that has no mirrors (every read asked of the server).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import ReportsCacheCrowding
from mnemobus.store.model import Entity, Fact
from mnemobus.store.neo4j import Neo4jStore
from test_neo4j_recall import count_round_trips  # same folder
from test_conformance import T0, alice_graph, entity, episode, fact, put, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
LATER = T0 + timedelta(days=1)


def _ids(hits: list[Any]) -> list[str]:
    return [h.id for h in hits]


async def test_a_fact_written_by_another_process_is_found_by_the_next_vector_search(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    g = await alice_graph(neo, group)
    assert await neo.preload(group)
    alice, coffee = g["alice"], g["coffee"]
    new = fact(group, alice, "drinks", coffee, "Alice drinks espresso every morning")  # type: ignore[arg-type]
    await put(other, facts=[new])
    hits = await neo.search_facts_vector(group, vec(new.fact), LATER, 3)
    assert hits[0].id == new.id and hits[0].score == pytest.approx(1.0, abs=1e-5)


# Not exclusive: twice in parallel runs another worker's write to the shared Neo4j deadlocked with this test's,
# which failed; the store now replays a deadlock's victim (write_txn.py, proved by test_neo4j_deadlocks.py), and
# the test reads and writes only its own groups
async def test_entities_and_episodes_written_by_another_process_are_found(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    await alice_graph(neo, group)
    assert await neo.preload(group)
    bob, ep = entity(group, "Bob"), episode(group, "m2", "Bob plays the cello on Sundays")
    await put(other, entities=[bob], episodes=[ep])
    assert _ids(await neo.search_entities_vector(group, vec("Bob"), 1)) == [bob.id]
    assert _ids(await neo.search_episodes_vector(group, vec(ep.content), 1)) == [ep.id]


async def test_a_fact_another_process_invalidated_is_found_only_before_its_end(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    g = await alice_graph(neo, group)
    assert await neo.preload(group)
    works_at: Fact = g["facts"][0]  # type: ignore[index]
    ended = T0 + timedelta(hours=12)
    async with other.transaction() as tx:
        await tx.update_fact(replace(works_at, invalid_at=ended, expired_at=ended))
    before = await neo.search_facts_vector(group, vec(works_at.fact), ended - timedelta(hours=1), 10)
    after = await neo.search_facts_vector(group, vec(works_at.fact), LATER, 10)
    assert works_at.id in _ids(before) and works_at.id not in _ids(after)


async def test_facts_another_process_deleted_are_no_longer_found(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    g = await alice_graph(neo, group)
    assert await neo.preload(group)
    await other.delete_episode(group, g["ep"].id)  # type: ignore[attr-defined]  # its facts go with it
    assert await neo.search_facts_vector(group, vec("Alice works at Acme"), LATER, 10) == []
    assert await neo.walk(group, [g["alice"].id], as_of=LATER, max_hops=2) == []  # type: ignore[attr-defined]


async def test_a_fact_never_appears_in_another_groups_search(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId, other_group: GroupId
) -> None:
    await alice_graph(neo, group)
    g2 = await alice_graph(neo, other_group)
    assert await neo.preload(group) and await neo.preload(other_group)
    extra = fact(other_group, g2["alice"], "drinks", g2["coffee"], "Alice drinks espresso")  # type: ignore[arg-type]
    await put(other, facts=[extra])
    hits = await neo.search_facts_vector(group, vec(extra.fact), LATER, 10)
    assert hits and all(h.id.startswith(f"{group}:") for h in hits)


async def test_mirrored_searches_and_walks_answer_as_the_server_does(
    neo: Neo4jStore, server_only: Neo4jStore, group: GroupId
) -> None:
    g = await alice_graph(neo, group)
    assert await neo.preload(group)
    ended: Fact = replace(g["facts"][1], invalid_at=T0 + timedelta(hours=1))  # type: ignore[index]
    async with neo.transaction() as tx:  # one fact no longer valid, so the validity filter matters
        await tx.update_fact(ended)
    for store_a, store_b in ((neo, server_only),):
        facts_a = await store_a.search_facts_vector(group, vec("Alice in Berlin"), LATER, 10)
        facts_b = await store_b.search_facts_vector(group, vec("Alice in Berlin"), LATER, 10)
        assert _ids(facts_a) == _ids(facts_b)
        assert [h.score for h in facts_a] == pytest.approx([h.score for h in facts_b], abs=1e-5)
        for method, query in (("search_entities_vector", "Alice"), ("search_episodes_vector", "Alice at Acme")):
            assert _ids(await getattr(store_a, method)(group, vec(query), 5)) == \
                _ids(await getattr(store_b, method)(group, vec(query), 5))
        walk = {"as_of": LATER, "max_hops": 3, "limit": 10}
        assert await store_a.walk(group, [g["alice"].id], **walk) == \
            await store_b.walk(group, [g["alice"].id], **walk)  # type: ignore[attr-defined]
        assert await store_a.walk(group, [g["alice"].id], relations=["works_at"], **walk) == \
            await store_b.walk(group, [g["alice"].id], relations=["works_at"], **walk)  # type: ignore[attr-defined]


async def test_a_walk_sees_another_processs_fact_once_the_version_is_asked_again(
    neo4j_uri: str, other: Neo4jStore, group: GroupId, neo: Neo4jStore
) -> None:
    strict = Neo4jStore(neo4j_uri, mirror_fresh_s=0.0)  # every walk confirms the group's version
    await strict.open()
    try:
        g = await alice_graph(neo, group)
        assert await strict.preload(group)
        dave = entity(group, "Dave")
        await put(other, entities=[dave], facts=[fact(group, g["alice"], "knows", dave, "Alice knows Dave")])  # type: ignore[arg-type]
        steps = await strict.walk(group, [g["alice"].id], as_of=LATER, max_hops=1)  # type: ignore[attr-defined]
        assert f"{group}:alice:knows:dave" in [s.fact_id for s in steps]
    finally:
        await strict.close()


async def test_this_processs_own_write_reaches_its_next_walk_at_once(neo: Neo4jStore, group: GroupId) -> None:
    g = await alice_graph(neo, group)
    assert await neo.preload(group)
    await neo.walk(group, [g["alice"].id], as_of=LATER, max_hops=1)  # type: ignore[attr-defined]  # version confirmed
    dave = entity(group, "Dave")
    await put(neo, entities=[dave], facts=[fact(group, g["alice"], "knows", dave, "Alice knows Dave")])  # type: ignore[arg-type]
    steps = await neo.walk(group, [g["alice"].id], as_of=LATER, max_hops=1)  # type: ignore[attr-defined]
    assert f"{group}:alice:knows:dave" in [s.fact_id for s in steps]


async def test_a_group_larger_than_the_budget_is_answered_by_the_server(neo4j_uri: str, neo: Neo4jStore,
                                                                      group: GroupId) -> None:
    small = Neo4jStore(neo4j_uri, vector_cache_mb=1)  # ~600 rows of 384 floats
    await small.open()
    try:
        people: list[Entity] = [entity(group, f"Person {i}") for i in range(800)]
        await small.bulk_load([(p, vec(p.name)) for p in people], [])
        assert not await small.preload(group)
        assert _ids(await small.search_entities_vector(group, vec("Person 7"), 1)) == [people[7].id]
    finally:
        await small.close()


async def test_a_group_left_unmirrored_for_its_size_is_counted_and_logged(
        neo4j_uri: str, neo: Neo4jStore, group: GroupId, caplog: pytest.LogCaptureFixture) -> None:
    small = Neo4jStore(neo4j_uri, vector_cache_mb=1)  # ~600 rows of 384 floats
    crowded: list[str] = []
    assert isinstance(small, ReportsCacheCrowding)  # so open_runtime wires it to mnemobus_vector_cache_crowded_total
    small.observe_vector_cache_crowded(crowded.append)
    await small.open()
    try:
        await small.bulk_load([(p, vec(p.name)) for p in (entity(group, f"Person {i}") for i in range(800))], [])
        with caplog.at_level(logging.WARNING, logger="mnemobus.store.neo4j.store"):
            assert not await small.preload(group)
        assert crowded == ["mirror"]
        assert any(group in r.getMessage() and "not mirrored" in r.getMessage() for r in caplog.records)
    finally:
        await small.close()


async def test_a_recalls_candidate_round_and_walk_cost_one_round_trip(neo4j_uri: str, neo: Neo4jStore,
                                                                     group: GroupId) -> None:
    """Full-text queries and the group's version go in one statement; vectors and the walk need none."""
    g = await alice_graph(neo, group)
    store = Neo4jStore(neo4j_uri, mirror_fresh_s=60.0)  # however slow the machine, the walk trusts that version
    await store.open()
    assert await store.preload(group)
    sent = count_round_trips(store)
    await asyncio.gather(
        store.search_facts_text(group, ["coffee"], LATER, 10),
        store.search_facts_vector(group, vec("coffee"), LATER, 10),
        store.search_entities_text(group, ["alice"], 5),
        store.search_entities_vector(group, vec("Alice"), 5),
        store.search_episodes_text(group, ["alice"], 5),
        store.search_episodes_vector(group, vec("Alice"), 5),
    )
    await store.walk(group, [g["alice"].id], as_of=LATER, max_hops=2)  # type: ignore[attr-defined]
    await store.close()
    assert len(sent) == 1, sent


async def test_the_least_recently_used_group_makes_room_and_both_still_answer(
    neo4j_uri: str, neo: Neo4jStore, group: GroupId, other_group: GroupId
) -> None:
    small = Neo4jStore(neo4j_uri, vector_cache_mb=1)  # room for one of the two groups below, not both
    await small.open()
    try:
        crowds = {g: [entity(g, f"Person {i}") for i in range(350)] for g in (group, other_group)}
        for people in crowds.values():
            await small.bulk_load([(p, vec(p.name)) for p in people], [])
        assert await small.preload(group) and await small.preload(other_group)
        assert group not in small._mirrors and other_group in small._mirrors  # type: ignore[operator]
        for g, people in crowds.items():
            assert _ids(await small.search_entities_vector(g, vec("Person 7"), 1)) == [people[7].id]
    finally:
        await small.close()


async def test_a_fact_without_an_embedding_is_walked_but_never_a_vector_hit(neo: Neo4jStore, group: GroupId) -> None:
    g = await alice_graph(neo, group)
    assert await neo.preload(group)
    paris = entity(group, "Paris")
    history = fact(group, g["alice"], "lived_in", paris, "Alice lived in Paris")  # type: ignore[arg-type]
    async with neo.transaction() as tx:
        await tx.insert_entity(paris, None)
        await tx.insert_fact(history, None)
    steps = await neo.walk(group, [g["alice"].id], as_of=LATER, max_hops=1)  # type: ignore[attr-defined]
    assert history.id in [s.fact_id for s in steps]
    assert history.id not in _ids(await neo.search_facts_vector(group, vec(history.fact), LATER, 10))


async def test_similar_entities_in_a_transaction_see_other_processes_and_its_own_writes(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    await alice_graph(neo, group)
    assert await neo.preload(group)
    theirs, mine = entity(group, "Robert Smith"), entity(group, "Roberta Smith")
    await put(other, entities=[theirs])
    async with neo.transaction() as tx:
        await tx.insert_entity(mine, vec(mine.name))
        found = await tx.similar_entities(group, vec("Robert Smith"), 2)
        assert [e.id for e, _ in found] == [theirs.id, mine.id]
        assert found[0][1] == pytest.approx(1.0, abs=1e-5) and found[0][0].name == "Robert Smith"


async def test_an_engine_opened_from_settings_with_backend_neo4j_ingests_and_recalls(neo4j_uri, tmp_path) -> None:
    from mnemobus.shared.config import Settings
    from mnemobus.kernel.backends import open_engine
    from mnemobus.store.model import Episode, RecallQuery, episode_id_for

    settings = Settings(store={"backend": "neo4j", "neo4j": {"uri": neo4j_uri}, "vector_cache_mb": 64},
                        memory={"embedding": {"provider": "hash"}})
    engine = await open_engine(settings)
    group = GroupId(f"user_settings_{uuid.uuid4().hex[:8]}")
    try:
        await engine.ingest(Episode(id=episode_id_for(group, "m1", "exchange"), group_id=group,
                                    content="I live in Lisbon.", role="exchange", source_message_id="m1",
                                    reference_time=datetime.now(UTC)))
        result = await engine.recall(RecallQuery("where do I live?", (group,)))
        assert [sf.fact.fact for sf in result.facts] == ["User lives in Lisbon"]
    finally:
        await engine.store.delete_group(group)
        await engine.close()


async def test_a_group_mirrored_while_empty_takes_its_first_facts_without_reloading(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId
) -> None:
    await put(other, entities=[entity(group, "Zed")])  # the group exists; its first fact comes later
    assert await neo.preload(group)
    mirror = neo._mirrors.peek(group)  # type: ignore[union-attr]
    await alice_graph(other, group)
    hits = await neo.search_facts_vector(group, vec("Alice works at Acme"), LATER, 3)
    assert f"{group}:alice:works_at:acme" in _ids(hits)
    assert neo._mirrors.peek(group) is mirror and mirror.facts.size == 4  # type: ignore[union-attr]  # caught up in place
