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
    for conn in store._readers:
        conn.set_trace_callback(trace)
    yield seen
    for conn in store._readers:
        conn.set_trace_callback(None)


def _query(*groups: GroupId) -> RecallQuery:
    return RecallQuery("where does Josh live and who climbs with Anna?", groups, as_of=T0 + timedelta(days=1),
                       max_facts=10, max_episodes=10)


async def _count(engine: MemoryEngine, seen: list[str], query: RecallQuery) -> int:
    await engine.recall(query)  # the first recall loads the group's matrices and graph: not what a recall costs
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
