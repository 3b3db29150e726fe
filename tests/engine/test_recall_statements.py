"""How many SQL statements a recall sends to SQLite (issue 36): counted, so the number cannot grow back unseen.

A recall over three groups was ~73 statements (plus FTS5's own), most of them one-row questions: each read
asked its group's version or newest rowid, each side of each recalled message was a statement of its own.
Statements that FTS5 runs inside a MATCH (traced with a leading "--") are its own business and not counted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta

import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode, RecallQuery, episode_id_for
from mnemobus.store.sqlite import SqliteStore

from engine_support import T0

pytestmark = pytest.mark.anyio
G = GroupId("user_counted")
EMPTY = GroupId("user_never_wrote")
SAID = ("Josh lives in Lisbon.", "Anna works at the bakery.", "Josh climbs with Anna every Sunday.",
        "My sister Maria likes chess.", "We talked about the garden again.")
# a recall of this file's group: BEGIN, the group's state, facts by text, entities by text (ranked, read, once
# widened), messages by text (ranked, read), messages by id, the anchors, their turns, whole facts, COMMIT:
# 15 (40 before issue 36's cuts; the empty group's share 7 -> 1, the turns around ten messages 20 -> 1)
STATEMENTS_PER_RECALL = 15


def _turns() -> list[Episode]:
    return [Episode(id=episode_id_for(G, f"m{i}", "user"), group_id=G, role="user", source_message_id=f"m{i}",
                    content=SAID[i % len(SAID)] + f" (turn {i})",
                    reference_time=T0 + timedelta(minutes=i), channel_id="c1") for i in range(40)]


@pytest.fixture
async def filled(engine: MemoryEngine) -> MemoryEngine:
    for outcome in await engine.ingest_many(_turns()):
        assert not isinstance(outcome, BaseException), outcome
    return engine


@pytest.fixture
def statements(filled: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement the store's reader connections run from here on, FTS5's internal ones left out."""
    seen: list[str] = []

    def trace(sql: str) -> None:
        if not sql.startswith("--"):
            seen.append(sql)

    store = filled.store
    assert isinstance(store, SqliteStore)
    connect = store._connect

    def traced() -> sqlite3.Connection:
        conn = connect()
        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(store, "_connect", traced)
    opened = [*store._readers, *store._loop_readers.values()]
    for conn in opened:
        conn.set_trace_callback(trace)
    yield seen
    for conn in opened:
        conn.set_trace_callback(None)


def _query(*groups: GroupId) -> RecallQuery:
    return RecallQuery("where does Josh live and who climbs with Anna?", groups, as_of=T0 + timedelta(days=1),
                       max_facts=10, max_episodes=10)


async def _count(engine: MemoryEngine, seen: list[str], query: RecallQuery) -> int:
    await engine.recall(query)  # the first recall loads the group's matrices and graph: not what a recall costs
    await engine.recall(query)  # nor the loop's connection's first look at each FTS5 table (on_loop.py)
    seen.clear()
    await engine.recall(query)
    return len(seen)


async def test_a_recall_of_one_group_sends_at_most_its_counted_statements(filled: MemoryEngine,
                                                                          statements: list[str]) -> None:
    result = await filled.recall(_query(G))
    assert result.episodes and result.facts, "the fill must give the recall facts and messages, or the count misses their reads"
    count = await _count(filled, statements, _query(G))
    assert count <= STATEMENTS_PER_RECALL, "\n".join(statements)


async def test_a_group_with_nothing_in_it_costs_a_recall_one_statement(filled: MemoryEngine,
                                                                      statements: list[str]) -> None:
    alone = await _count(filled, statements, _query(G))
    with_empty = await _count(filled, statements, _query(G, EMPTY))
    assert with_empty - alone == 1, "\n".join(statements)


async def test_the_turns_around_every_recalled_message_are_read_in_one_statement(filled: MemoryEngine,
                                                                                 statements: list[str]) -> None:
    await filled.recall(_query(G))
    statements.clear()
    result = await filled.recall(_query(G))
    turns = [s for s in statements if "UNION ALL" in s]
    assert len(turns) == 1
    assert turns[0].count("UNION ALL") >= 2 * 3 - 1, "at least three anchors, two sides each, in that statement"
    recalled = {ep.episode.source_message_id for ep in result.episodes}
    assert len(recalled) > 3, "the turns around the anchors came back with them"


# -- a ranking of the words alone, shared by a recall's groups ------------------------------------------------

OTHER = GroupId("agent_counted__user_counted")  # a user's group and an agent's: a recall reads both


def _ranked(statements: list[str]) -> list[str]:
    """The full-text rankings by the words alone a recall ran (bm25() over a table, no group token in the
    match: a group applied inside FTS5 makes a ranking that group's own)."""
    return [s for s in statements if "bm25(" in s and "gtok :" not in s]


@pytest.fixture
async def two_groups(filled: MemoryEngine) -> MemoryEngine:
    """The same words said in a second group (a user's group and an agent's), in turns of its own."""
    other = [Episode(id=episode_id_for(OTHER, f"o{i}", "user"), group_id=OTHER, role="user", source_message_id=f"o{i}",
                     content=SAID[i % len(SAID)] + f" (other turn {i})", reference_time=T0 + timedelta(minutes=i),
                     channel_id="c2") for i in range(40)]
    for outcome in await filled.ingest_many(other):
        assert not isinstance(outcome, BaseException), outcome
    return filled


async def test_a_second_group_of_the_same_words_adds_no_full_text_ranking(two_groups: MemoryEngine,
                                                                        statements: list[str]) -> None:
    await _count(two_groups, statements, _query(G))
    alone = _ranked(statements)
    assert alone, "the query's words must be ranked by themselves, or there is nothing to share"
    await _count(two_groups, statements, _query(G, OTHER))
    both = _ranked(statements)
    # the tables hold every group, and ranking by the words names none: one snapshot, one ranking for both
    assert sorted(both) == sorted(alone), "\n".join(both)


async def test_a_second_group_reads_base_rows_only_for_rankings_of_its_own(two_groups: MemoryEngine,
                                                                         statements: list[str]) -> None:
    def reads(seen: list[str]) -> tuple[int, int]:
        """(base-row reads after a ranking, rankings with a group token: a group's own)"""
        return (sum("json_each" in s for s in seen), sum("bm25(" in s and "gtok :" in s for s in seen))

    await _count(two_groups, statements, _query(G))
    kept_alone, own_alone = reads(statements)
    await _count(two_groups, statements, _query(G, OTHER))
    kept_both, own_both = reads(statements)
    assert kept_alone > own_alone, "a ranking by the words alone must be read, or there is nothing to share"
    # the rows a shared ranking names are read once, with their group, and each group keeps its own
    assert kept_both - kept_alone == own_both - own_alone, "\n".join(statements)


async def test_groups_sharing_a_ranking_each_get_only_their_own_rows(two_groups: MemoryEngine) -> None:
    store = two_groups.store
    assert isinstance(store, SqliteStore)
    terms = ["bakery"]  # in few rows: ranked by the word alone over both groups' rows (not by the group's token)

    async def searched(view: SqliteStore, _: None) -> list[list[str]]:
        return [[h.id for h in await view.search_episodes_text(g, terms, 10)] for g in (G, OTHER)]

    shared = await store.run_reads(searched, lambda: None)  # one snapshot: the groups share the ranking
    each = [[h.id for h in await store.search_episodes_text(g, terms, 10)] for g in (G, OTHER)]  # each its own
    assert shared == each
    mine = {ep.id for ep in await store.episodes(G, 100)}
    theirs = {ep.id for ep in await store.episodes(OTHER, 100)}
    assert shared[0] and set(shared[0]) <= mine and not set(shared[0]) & theirs
    assert shared[1] and set(shared[1]) <= theirs and not set(shared[1]) & mine
