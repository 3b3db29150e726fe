"""Facts read from a Neo4j group's mirror: the server's answer, including every other process's committed write.

`neo` keeps the group mirrored; `other` is a second store on the same server, which is
what another process is. Each write that changes a field of a Fact (an entity's new
display name, a new source, an update, retrieval counts, a deletion) must show in
neo's next recall, whose candidate round confirms the group's version, and in
`get_facts` of a store that confirms the version on every read (`strict`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from mnemobus.engine.recall import recall
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Fact, RecallQuery, Said
from mnemobus.store.neo4j import Neo4jStore
from test_conformance import EMB, T0, alice_graph, episode, said_key, vec  # same folder (pytest prepend import mode)
from test_neo4j_recall import count_round_trips

pytestmark = pytest.mark.anyio
LATER = T0 + timedelta(days=1)


@pytest.fixture
async def strict(open_neo4j: Callable[..., Any]) -> AsyncIterator[Neo4jStore]:
    """A mirroring store that asks for the group's version on every read (no trust window)."""
    async with open_neo4j(mirror_fresh_s=0.0) as store:
        yield store


@pytest.fixture
async def trusting(open_neo4j: Callable[..., Any]) -> AsyncIterator[Neo4jStore]:
    """A mirroring store that trusts a confirmed version for a minute: reads it answers alone make no round trip."""
    async with open_neo4j(mirror_fresh_s=60.0) as store:
        yield store


async def _recalled(store: Neo4jStore, group: GroupId, text: str) -> dict[str, Fact]:
    result = await recall(store, EMB, RecallQuery(text=text, group_ids=(group,), as_of=LATER))
    return {sf.fact.id: sf.fact for sf in result.facts}


async def test_mirrored_facts_read_back_as_the_server_gives_them(
    neo: Neo4jStore, server_only: Neo4jStore, group: GroupId
) -> None:
    g = await alice_graph(neo, group)
    facts: list[Fact] = g["facts"]  # type: ignore[assignment]
    later_ep = episode(group, "m2", "Alice still works at Acme")
    async with neo.transaction() as tx:  # every field a fact can change: an end, a second source
        await tx.insert_episode(later_ep, screened=False, embedding=vec(later_ep.content))
        await tx.update_fact(replace(facts[1], invalid_at=T0 + timedelta(hours=2), expired_at=T0 + timedelta(hours=3),
                                     superseded_by=facts[2].id, confidence=0.55, last_seen=T0 + timedelta(hours=1)))
        await tx.add_fact_source(group, facts[0].id, later_ep.id, later_ep.source_message_id)
    await neo.mark_retrieved(group, [facts[0].id])
    await neo.flush_retrievals()
    assert await neo.preload(group)
    ids = [facts[2].id, facts[0].id, facts[1].id, facts[0].id, facts[3].id]  # an order of its own, one id twice
    assert await neo.get_facts(group, ids) == await server_only.get_facts(group, ids)


async def test_a_recall_of_a_mirrored_group_costs_one_round_trip(trusting: Neo4jStore, group: GroupId) -> None:
    """The candidate round (full-text queries and the group's version) only: the walk and the rows come from memory."""
    await alice_graph(trusting, group)
    assert await trusting.preload(group)
    sent = count_round_trips(trusting)
    found = await _recalled(trusting, group, "where does Alice work")
    assert f"{group}:alice:works_at:acme" in found
    assert len(sent) == 1, sent


async def test_another_processs_rename_shows_in_the_next_recall(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    assert await neo.preload(group)
    async with other.transaction() as tx:
        await tx.observe_entity(group, g["alice"].id, name="Alicia", alias="alicia", seen=LATER)  # type: ignore[attr-defined]
    found = await _recalled(neo, group, "where does Alice work")
    assert found[f"{group}:alice:works_at:acme"].subject_name == "Alicia"


async def test_another_processs_rename_shows_in_get_facts(
    strict: Neo4jStore, other: Neo4jStore, neo: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    assert await strict.preload(group)
    async with other.transaction() as tx:
        await tx.observe_entity(group, g["coffee"].id, name="Espresso", alias="espresso", seen=LATER)  # type: ignore[attr-defined]
    (likes,) = await strict.get_facts(group, [f"{group}:alice:likes:coffee"])
    assert (likes.subject_name, likes.object_name) == ("Alice", "Espresso")


async def test_another_processs_new_source_shows_in_get_facts(
    strict: Neo4jStore, other: Neo4jStore, neo: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    works_at: Fact = g["facts"][0]  # type: ignore[index]
    assert await strict.preload(group)
    again = episode(group, "m2", "Alice told me again she works at Acme")
    async with other.transaction() as tx:
        await tx.insert_episode(again, screened=False, embedding=vec(again.content))
        await tx.add_fact_source(group, works_at.id, again.id, again.source_message_id)
    (got,) = await strict.get_facts(group, [works_at.id])
    assert set(got.episode_ids) == {g["ep"].id, again.id}  # type: ignore[attr-defined]
    assert set(got.source_message_ids) == {"m1", "m2"}


async def test_another_processs_invalidation_shows_in_the_next_recall(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    likes: Fact = g["facts"][3]  # type: ignore[index]
    assert await neo.preload(group)
    assert likes.id in await _recalled(neo, group, "Alice likes coffee")
    async with other.transaction() as tx:
        await tx.update_fact(replace(likes, invalid_at=T0 + timedelta(hours=1), expired_at=T0 + timedelta(hours=1)))
    assert likes.id not in await _recalled(neo, group, "Alice likes coffee")


async def test_another_processs_invalidation_shows_in_get_facts(
    strict: Neo4jStore, other: Neo4jStore, neo: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    likes: Fact = g["facts"][3]  # type: ignore[index]
    assert await strict.preload(group)
    ended = replace(likes, invalid_at=T0 + timedelta(hours=1), expired_at=T0 + timedelta(hours=2),
                    superseded_by=g["facts"][0].id, confidence=0.3)  # type: ignore[index]
    async with other.transaction() as tx:
        await tx.update_fact(ended)
    (got,) = await strict.get_facts(group, [likes.id])
    assert (got.invalid_at, got.expired_at, got.superseded_by, got.confidence) == \
        (ended.invalid_at, ended.expired_at, ended.superseded_by, ended.confidence)


async def test_another_processs_retrieval_counts_show_in_get_facts(
    strict: Neo4jStore, other: Neo4jStore, neo: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    works_at: Fact = g["facts"][0]  # type: ignore[index]
    assert await strict.preload(group)
    await other.mark_retrieved(group, [works_at.id, works_at.id])
    await other.flush_retrievals()
    (got,) = await strict.get_facts(group, [works_at.id])
    assert got.retrieval_count == 2


async def test_another_processs_retrieval_counts_show_in_the_next_recall(
    neo: Neo4jStore, other: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    works_at: Fact = g["facts"][0]  # type: ignore[index]
    assert await neo.preload(group)
    await other.mark_retrieved(group, [works_at.id] * 3)
    await other.flush_retrievals()
    assert (await _recalled(neo, group, "where does Alice work"))[works_at.id].retrieval_count == 3


async def test_own_retrievals_count_at_once_and_once_only_when_written(trusting: Neo4jStore, group: GroupId) -> None:
    g = await alice_graph(trusting, group)
    works_at: Fact = g["facts"][0]  # type: ignore[index]
    assert await trusting.preload(group)
    await trusting.mark_retrieved(group, [works_at.id])
    assert (await trusting.get_facts(group, [works_at.id]))[0].retrieval_count == 1  # held, not written yet
    await trusting.flush_retrievals()
    sent = count_round_trips(trusting)
    assert (await trusting.get_facts(group, [works_at.id]))[0].retrieval_count == 1
    assert sent == []  # the written counts went into the mirror with the write: nothing to read back


async def test_facts_another_process_deleted_are_not_returned(
    strict: Neo4jStore, other: Neo4jStore, neo: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    g = await alice_graph(neo, group)
    ids = [f.id for f in g["facts"]]  # type: ignore[attr-defined]
    assert await strict.preload(group)
    await other.delete_episode(group, g["ep"].id)  # type: ignore[attr-defined]  # the only source of every fact
    assert await strict.get_facts(group, ids) == []


async def test_embeddings_stored_without_the_byte_copy_still_load(
    open_neo4j: Callable[..., Any], neo: Neo4jStore, group: GroupId
) -> None:
    """Rows written before `emb32` existed carry only the float list the vector index reads."""
    g = await alice_graph(neo, group)
    for q in ("MATCH ()-[r:FACT {group_id: $g}]->() REMOVE r.emb32",
              "MATCH (n:Entity {group_id: $g}) REMOVE n.emb32", "MATCH (n:Episode {group_id: $g}) REMOVE n.emb32"):
        await neo._open_driver().execute_query(q, g=group, database_=neo.database)
    async with open_neo4j() as fresh:
        assert await fresh.preload(group)
        hits = await fresh.search_facts_vector(group, vec("Alice likes strong coffee"), LATER, 1)
        assert [h.id for h in hits] == [g["facts"][3].id]  # type: ignore[index]
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        berlin = await fresh.search_entities_vector(group, vec("Berlin"), 1)
        assert [h.id for h in berlin] == [g["berlin"].id]  # type: ignore[attr-defined]


async def test_a_mirror_loads_embeddings_equal_to_the_float_lists(neo: Neo4jStore, server_only: Neo4jStore,
                                                                 group: GroupId) -> None:
    """The byte copy and the list the server's vector search reads are one embedding: both rank alike."""
    await alice_graph(neo, group)
    assert await neo.preload(group)
    mirrored = await neo.search_facts_vector(group, vec("Acme in Berlin"), LATER, 4)
    served = await server_only.search_facts_vector(group, vec("Acme in Berlin"), LATER, 4)
    assert [h.id for h in mirrored] == [h.id for h in served]
    assert [h.score for h in mirrored] == pytest.approx([h.score for h in served], abs=1e-6)


async def test_own_counts_written_after_another_processs_write_do_not_skip_it(
    trusting: Neo4jStore, other: Neo4jStore, neo: Neo4jStore, group: GroupId  # noqa: F811
) -> None:
    """A mirror takes its own count write without a read only when that write is the one version it lacks."""
    g = await alice_graph(neo, group)
    works_at, likes = g["facts"][0], g["facts"][3]  # type: ignore[index]
    assert await trusting.preload(group)
    ended = replace(likes, invalid_at=T0 + timedelta(hours=1), expired_at=T0 + timedelta(hours=1))
    async with other.transaction() as tx:  # version v+1, which `trusting`'s mirror has not read
        await tx.update_fact(ended)
    await trusting.mark_retrieved(group, [works_at.id])
    await trusting.flush_retrievals()  # v+2
    counted, invalidated = await trusting.get_facts(group, [works_at.id, likes.id])
    assert (counted.retrieval_count, invalidated.invalid_at) == (1, ended.invalid_at)


async def test_the_turns_around_an_episode_come_from_the_mirror_as_the_server_gives_them(
    trusting: Neo4jStore, server_only: Neo4jStore, group: GroupId
) -> None:
    said = [episode(group, f"t{i}", f"turn {i}", at=T0 + timedelta(seconds=i)) for i in range(5)]
    said += [replace(episode(group, "x", "said in another channel", at=T0 + timedelta(seconds=2)), channel_id="c2"),
             episode(group, "late", "an hour and more later", at=T0 + timedelta(hours=2))]
    async with trusting.transaction() as tx:
        for ep in said:
            await tx.insert_episode(ep, screened=False, embedding=vec(ep.content))
    assert await trusting.preload(group)
    anchors = [said[0].id, said[2].id, said[4].id]
    sent = count_round_trips(trusting)
    mirrored = await trusting.episode_context(group, anchors, span=2, within_s=3600)
    assert sent == []  # answered from memory
    assert mirrored == await server_only.episode_context(group, anchors, span=2, within_s=3600)
    assert len(mirrored) == 8  # t0: two after; t2: two each side; t4: two before (x, late: outside)


async def test_light_reads_from_the_mirror_say_what_the_servers_whole_rows_say(
    trusting: Neo4jStore, server_only: Neo4jStore, group: GroupId
) -> None:
    said = [episode(group, f"t{i}", f"Turn {i}", at=T0 + timedelta(seconds=i, microseconds=7 * i)) for i in range(5)]
    async with trusting.transaction() as tx:
        for ep in said:
            await tx.insert_episode(ep, screened=False, embedding=vec(ep.content))
    assert await trusting.preload(group)
    asked = [said[3].id, said[0].id]
    sent = count_round_trips(trusting)
    light = await trusting.get_episodes(group, asked, light=True)
    around = await trusting.episode_context(group, asked, span=1, within_s=3600, light=True)
    assert sent == []  # answered from memory
    assert all(isinstance(r, Said) for r in light) and all(isinstance(n.episode, Said) for n in around)
    whole = await server_only.get_episodes(group, asked)
    assert [said_key(r) for r in light] == [said_key(r) for r in whole]
    assert [r.whole() for r in light if isinstance(r, Said) and r.whole] == whole  # built whole with no read
    assert [(n.anchor_id, n.offset, said_key(n.episode)) for n in around] == [
        (n.anchor_id, n.offset, said_key(n.episode))
        for n in await server_only.episode_context(group, asked, span=1, within_s=3600)]


async def test_a_read_between_a_commit_and_its_answer_sees_the_committed_write(
        trusting: Neo4jStore, group: GroupId, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen in fresh-clone CI: the worker's reinforcement committed, the test saw its episode and read the fact
    before the worker heard the commit's answer, from a mirror confirmed during that write's transaction: the
    confidence the write had just replaced (0.4, not 1.0)."""
    import neo4j

    fact = (await alice_graph(trusting, group))["facts"][0]  # type: ignore[index]
    assert await trusting.preload(group)
    assert (await trusting.get_facts(group, [fact.id]))[0].confidence == fact.confidence  # the mirror, confirmed
    seen: list[float] = []
    commit = neo4j.AsyncTransaction.commit

    async def commit_then_read(self: neo4j.AsyncTransaction) -> None:
        await commit(self)  # the server holds the write; its answer has not reached the writer
        seen.append((await trusting.get_facts(group, [fact.id]))[0].confidence)

    monkeypatch.setattr(neo4j.AsyncTransaction, "commit", commit_then_read)
    async with trusting.transaction() as tx:
        await tx.update_fact(replace(fact, confidence=0.25))
    assert seen == [0.25]
    assert (await trusting.get_facts(group, [fact.id]))[0].confidence == 0.25
