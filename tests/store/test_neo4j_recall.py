"""Neo4j recall path: reads issued together share one round trip, retrieval counts are written later.

Recall issues its candidate queries side by side and then its row fetches side by
side; on Neo4j each round trip is driver work and a network hop, so reads queued
in one event-loop turn go to the server as one statement. What this must never
change is an answer: the combined reads give exactly what each read gives alone,
and one read's failure is only its own.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.neo4j.coalesce import combine_reads, kind_of, statements_for
from test_conformance import T0, alice_graph, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


def count_round_trips(store: Neo4jStore) -> list[str]:
    sent: list[str] = []
    real = store._read_rows

    async def counting(query: str, **params: Any) -> list[dict[str, Any]]:
        sent.append(query)
        return await real(query, **params)

    store._read_rows = counting  # type: ignore[method-assign]
    return sent


def test_combined_reads_keep_their_parameters_apart() -> None:
    text, params, _ = combine_reads([("RETURN $x AS a", ("a",), {"x": 1}),
                                     ("RETURN $x AS b, $y AS c", ("b", "c"), {"x": 2, "y": 3})])
    assert params == {"b0_x": 1, "b1_x": 2, "b1_y": 3}
    assert "$b0_x" in text and "$b1_x" in text and "$x" not in text.replace("$b0_x", "").replace("$b1_x", "")


def test_a_combined_statements_text_names_its_reads_not_their_number_or_order() -> None:
    by_id = ("MATCH (n {id: $id}) RETURN n.x AS x", ("x",))
    count = ("MATCH (n) RETURN count(n) AS c", ("c",))

    def text(*reads: tuple[str, tuple[str, ...], dict[str, object]]) -> str:
        return combine_reads(reads)[0]

    two = text((*by_id, {"id": 1}), (*count, {}), (*by_id, {"id": 2}))
    assert two == text((*count, {}), (*by_id, {"id": 3}), (*by_id, {"id": 4}), (*by_id, {"id": 5}))


def test_copies_of_a_read_share_a_statement_where_their_limits_agree() -> None:
    # LIMIT and SKIP take only parameters and literals, so copies asking other limits are parts apart, and a read
    # with a subquery of its own cannot run once per row at all
    limited, by_id, nested = "MATCH (n) RETURN n LIMIT $k", "MATCH (n {id: $id}) RETURN n", "CALL { RETURN 1 AS x } RETURN x"
    reads = [(limited, {"k": 3}), (by_id, {"id": 1}), (limited, {"k": 3}), (limited, {"k": 5}), (nested, {}),
             (by_id, {"id": 2}), (nested, {})]
    assert statements_for([kind_of(q, p) for q, p in reads]) == [[0, 2, 1, 5, 3, 4], [6]]


# full-text scores count every group's documents in the index: another worker writing between the two reads
# changes them
@pytest.mark.exclusive
async def test_reads_issued_together_share_one_round_trip_and_answer_as_alone(server_only: Neo4jStore,
                                                                              group: GroupId) -> None:
    neo = server_only
    g = await alice_graph(neo, group)
    as_of = T0 + timedelta(days=1)
    calls = [
        lambda: neo.search_facts_text(group, ["berlin", "coffee"], as_of, 10),
        lambda: neo.search_facts_vector(group, vec("Alice lives in Berlin"), as_of, 10),
        lambda: neo.search_entities_text(group, ["alice"], 5),
        lambda: neo.search_entities_vector(group, vec("Alice"), 5),
        lambda: neo.search_episodes_text(group, ["alice"], 5),
        lambda: neo.search_episodes_vector(group, vec("Alice"), 5),
        lambda: neo.walk(group, [g["alice"].id], as_of=as_of, max_hops=2),  # type: ignore[attr-defined]
    ]
    alone = [await c() for c in calls]  # one after another: each is its own statement
    sent = count_round_trips(neo)
    together = await asyncio.gather(*(c() for c in calls))
    assert list(together) == alone
    assert alone[0] and alone[1] and alone[2] and alone[6]  # the corpus answers these, so the test means something
    # the walk's second hop depends on its first: at most one more round trip, never one per read
    assert len(sent) <= 2, sent


async def test_copies_of_a_read_for_several_groups_share_one_statement_and_answer_as_alone(
    server_only: Neo4jStore, new_group: Callable[[str], GroupId]
) -> None:
    neo = server_only
    graphs = {g: await alice_graph(neo, g) for g in (new_group("c"), new_group("c"), new_group("c"))}

    def calls(group: GroupId) -> list[Callable[[], Awaitable[Any]]]:
        g = graphs[group]
        return [lambda: neo.get_facts(group, [f.id for f in g["facts"]]),  # type: ignore[attr-defined]
                lambda: neo.get_episodes(group, [g["ep"].id]),  # type: ignore[attr-defined]
                lambda: neo.search_entities_vector(group, vec("Alice"), 3),  # LIMIT $k: one part per k asked
                lambda: neo.search_entities_vector(group, vec("Acme"), 2)]

    groups = list(graphs)
    alone = [await c() for group in groups for c in calls(group)]
    assert all(alone)  # each read answers something, so the comparison means something
    sent = count_round_trips(neo)
    two = await asyncio.gather(*(c() for group in groups[:2] for c in calls(group)))
    first_of_two = sent[0]
    sent.clear()
    three = await asyncio.gather(*(c() for group in groups for c in calls(group)))
    assert list(two) == alone[:8] and list(three) == alone
    assert len(sent) == 1 and sent[0] == first_of_two  # one text, planned once, whatever the number of groups


async def test_a_failing_read_fails_alone(neo: Neo4jStore, group: GroupId) -> None:
    await alice_graph(neo, group)

    async def bad() -> list[dict[str, Any]]:
        return await neo._qc("RETURN 1 / $zero AS x", ("x",), zero=0)

    good, broken = await asyncio.gather(neo.search_entities_text(group, ["alice"], 5), bad(), return_exceptions=True)
    assert isinstance(broken, Exception)
    assert not isinstance(good, BaseException) and good


async def test_retrieval_counts_are_seen_at_once_and_stored_by_the_flush(
    neo: Neo4jStore, group: GroupId, neo4j_uri: str
) -> None:
    g = await alice_graph(neo, group)
    f = g["facts"][0]  # type: ignore[index]
    other = Neo4jStore(neo4j_uri)  # another process's view: sees only what is written
    await other.open()
    try:
        await neo.mark_retrieved(group, [f.id])
        await neo.mark_retrieved(group, [f.id])
        (mine,) = await neo.get_facts(group, [f.id])
        assert mine.retrieval_count == 2
        await neo.flush_retrievals()
        (theirs,) = await other.get_facts(group, [f.id])
        assert theirs.retrieval_count == 2
        (mine,) = await neo.get_facts(group, [f.id])
        assert mine.retrieval_count == 2  # written once, not counted again from memory
        await neo.mark_retrieved(group, [f.id])
        for _ in range(50):  # written in the background within RETRIEVAL_FLUSH_S
            (theirs,) = await other.get_facts(group, [f.id])
            if theirs.retrieval_count == 3:
                break
            await asyncio.sleep(0.1)
        assert theirs.retrieval_count == 3
    finally:
        await other.close()


async def test_close_writes_the_counts_still_held(neo4j_uri: str, group: GroupId) -> None:
    first = Neo4jStore(neo4j_uri)
    await first.open()
    g = await alice_graph(first, group)
    f = g["facts"][0]  # type: ignore[index]
    await first.mark_retrieved(group, [f.id])
    await first.close()
    second = Neo4jStore(neo4j_uri)
    await second.open()
    try:
        (got,) = await second.get_facts(group, [f.id])
        assert got.retrieval_count == 1
    finally:
        await second.delete_group(group)
        await second.close()


# Not exclusive though journalled: a store opened meanwhile on another worker leaves a journal alone while its
# owner's lease lasts (store/neo4j/erasure.py; test_neo4j_erasure.py), so it no longer takes part of the counts
async def test_a_group_larger_than_a_delete_batch_goes_in_several_transactions(
    neo: Neo4jStore, group: GroupId, other_group: GroupId, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mnemobus.store.neo4j.erasure as neo4j_module

    await alice_graph(neo, group)  # 1 episode, 5 entities, 4 facts
    await alice_graph(neo, other_group)
    monkeypatch.setattr(neo4j_module, "DELETE_BATCH", 2)
    monkeypatch.setattr(neo4j_module, "ONE_TXN_ROWS", 2)  # else the group fits one all-or-nothing transaction
    counts = await neo.delete_group(group)
    assert (counts.episodes, counts.entities, counts.facts) == (1, 5, 4)
    assert await neo.count_facts(group) == 0 and await neo.count_episodes(group) == 0
    assert await neo.count_facts(other_group) == 4
