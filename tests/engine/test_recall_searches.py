"""The searches a recall makes (issue 36, docs/performance.md "The searches an enriched request makes"): counted,
so a new search on the request path shows up here before it shows up in the plugin's CPU.

Per group holding rows: facts and messages by text and by vector, one each, and entities by both only when a
signal they seed is on (the walk, graph recall, communities); the query is embedded once for all the groups and
tables; a fact search asks for no more candidates than the answer can use.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.recall import MIN_CANDIDATES
from mnemobus.engine.recipes import RECIPES, tuned
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode, RecallQuery, ScoredFact, episode_id_for
from mnemobus.store.sqlite import SqliteStore

from engine_support import T0, CountingEmbedder

pytestmark = pytest.mark.anyio
GROUPS = (GroupId("user_searched"), GroupId("agent_bot__user_searched"))
SAID = {GROUPS[0]: ("Josh lives in Lisbon.", "Josh climbs with Anna every Sunday."),  # each group its own facts:
        GROUPS[1]: ("Anna lives in Porto.", "Anna climbs with Josh every Monday.")}  # the same one would show once
SEARCHES = ("search_facts_text", "search_entities_text", "search_episodes_text",
            "search_facts_vector", "search_entities_vector", "search_episodes_vector")
SEEDS = ("search_entities_text", "search_entities_vector")


@pytest.fixture
async def counted(tmp_path) -> tuple[MemoryEngine, CountingEmbedder, Counter[tuple[str, str]]]:  # type: ignore[no-untyped-def]
    embedder = CountingEmbedder()
    store = SqliteStore(tmp_path / "searched.sqlite3")
    await store.open()
    engine = MemoryEngine(store, embedder=embedder)
    turns = [Episode(id=episode_id_for(g, f"m{i}", "user"), group_id=g, role="user", source_message_id=f"m{i}",
                     content=SAID[g][i % 2], reference_time=T0 + timedelta(minutes=i), channel_id="c1")
             for g in GROUPS for i in range(6)]
    for outcome in await engine.ingest_many(turns):
        assert not isinstance(outcome, BaseException), outcome
    await engine.recall(_query())  # the groups loaded: a cold group's first run may be made twice (on_loop.py)
    calls: Counter[tuple[str, str]] = Counter()
    for name in SEARCHES:
        search = getattr(store, name)

        async def counting(group, *a, _search=search, _name=name, **k):  # type: ignore[no-untyped-def]
            calls[(_name, group)] += 1
            return await _search(group, *a, **k)

        setattr(store, name, counting)
    embedder.calls.clear()
    yield engine, embedder, calls
    await engine.close()


def _query() -> RecallQuery:
    return RecallQuery("where does Josh live and who climbs with Anna?", GROUPS, as_of=T0 + timedelta(days=1),
                       max_facts=10, max_episodes=10)


async def test_a_recall_of_two_groups_embeds_its_query_once(counted) -> None:  # type: ignore[no-untyped-def]
    engine, embedder, _ = counted
    result = await engine.recall(_query())
    assert {f.fact.group_id for f in result.facts} == set(GROUPS), "both groups must answer, or one was not searched"
    assert embedder.calls == [[_query().text]]


async def test_each_group_gets_one_text_and_one_vector_search_of_facts_and_messages(counted) -> None:  # type: ignore[no-untyped-def]
    engine, _, calls = counted
    await engine.recall(_query())
    assert calls == Counter({(name, g): 1 for name in SEARCHES if name not in SEEDS for g in GROUPS})


async def test_the_walk_adds_one_text_and_one_vector_search_of_entities_a_group(counted) -> None:  # type: ignore[no-untyped-def]
    engine, _, calls = counted
    engine.recipes = tuned({"walk": True})
    await engine.recall(_query())
    assert calls == Counter({(name, g): 1 for name in SEARCHES for g in GROUPS})


@pytest.mark.parametrize(("max_facts", "asked"), [(3, MIN_CANDIDATES), (15, 15), (100, RECIPES["hybrid"].candidates)])
async def test_a_fact_search_asks_for_no_more_candidates_than_the_answer_can_use(counted, max_facts: int,  # type: ignore[no-untyped-def]
                                                                                  asked: int) -> None:
    engine, _, _ = counted
    store = engine.store
    limits: list[int] = []
    search = store.search_facts_text

    async def recording(group, terms, as_of, limit):  # type: ignore[no-untyped-def]
        limits.append(limit)
        return await search(group, terms, as_of, limit)

    store.search_facts_text = recording
    await engine.recall(replace(_query(), max_facts=max_facts))
    assert limits == [asked, asked]


async def test_a_group_reads_half_again_an_answers_messages_and_the_turns_around_the_first_half(counted) -> None:  # type: ignore[no-untyped-def]
    engine, _, _ = counted
    store = engine.store
    read: list[int] = []
    anchored: list[int] = []
    get_episodes, episode_context = store.get_episodes, store.episode_context

    async def reading(group, ids, **k):  # type: ignore[no-untyped-def]
        read.append(len(ids))
        return await get_episodes(group, ids, **k)

    async def around(group, ids, **k):  # type: ignore[no-untyped-def]
        anchored.append(len(ids))
        return await episode_context(group, ids, **k)

    store.get_episodes, store.episode_context = reading, around
    result = await engine.recall(replace(_query(), max_episodes=3))
    assert result.episodes, "the messages must be found, or nothing was read around them"
    assert read == [4, 4] and anchored == [2, 2]  # of the 6 messages each group holds, all found


async def test_a_recall_cut_to_one_ranking_keeps_its_best_items_and_reads_only_those_whole(counted) -> None:  # type: ignore[no-untyped-def]
    engine, _, _ = counted
    store = engine.store
    whole: list[str] = []
    get_facts = store.get_facts

    async def reading(group, ids):  # type: ignore[no-untyped-def]
        whole.extend(ids)
        return await get_facts(group, ids)

    everything = await engine.recall(_query())
    assert len(everything.facts) > 1 and everything.episodes, "both kinds must be found, or the cut decides nothing"
    store.get_facts = reading
    # cut just below the best fact: one fact kept, the others left out
    limit = next(i for i, item in enumerate(everything.ranked()) if isinstance(item, ScoredFact)) + 1
    cut = await engine.recall(replace(_query(), max_items=limit))
    def ids(items):  # type: ignore[no-untyped-def]
        return [(type(i).__name__, i.fact.id if isinstance(i, ScoredFact) else i.episode.id, i.score) for i in items]

    assert ids(cut.ranked()) == ids(everything.ranked(limit))  # the same items, in the same order
    assert len(cut.facts) == 1 < len(everything.facts)
    assert sorted(whole) == sorted(f.fact.id for f in cut.facts)  # none read whole that the cut left out
