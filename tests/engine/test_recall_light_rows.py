"""A recall builds whole message rows only for the messages it returns (issue 36).

It ranks ~40 messages a group (the found ones and the turns around them) and shows at most `max_episodes`; the
rest are read light (`Said`: id, group, content, time), which is what ranking and de-duplication use.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

import mnemobus.store.sqlite.rows as sqlite_rows
import mnemobus.store.sqlite.store as sqlite_store
from mnemobus.engine import MemoryEngine
from mnemobus.store.model import Episode, RecallQuery

from engine_support import T0
from test_recall_statements import G, filled  # noqa: F401 - filled: a fixture (40 turns of one channel)

pytestmark = pytest.mark.anyio


def _query(max_episodes: int) -> RecallQuery:
    return RecallQuery("where does Josh live and who climbs with Anna?", (G,), as_of=T0 + timedelta(days=1),
                       max_facts=10, max_episodes=max_episodes)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the whole Episode rows the SQLite store builds from here on (read whole, or built from a light
    row's fetched columns)."""
    seen: list[str] = []
    whole = sqlite_rows.episode_of

    def counted(row: Sequence[Any]) -> Episode:
        seen.append(row[0])
        return whole(row)

    monkeypatch.setattr(sqlite_store, "episode_of", counted)
    monkeypatch.setattr(sqlite_rows, "episode_of", counted)
    return seen


async def test_a_recall_builds_whole_rows_only_for_the_messages_it_returns(filled: MemoryEngine,
                                                                           built: list[str]) -> None:
    result = await filled.recall(_query(3))
    assert len(result.episodes) == 3, "the fill must give more messages than are shown, or nothing is left out"
    assert sorted(built) == sorted(se.episode.id for se in result.episodes)


async def test_the_returned_messages_are_whole_and_ranked_as_before(filled: MemoryEngine) -> None:
    ten = (await filled.recall(_query(10))).episodes
    three = (await filled.recall(_query(3))).episodes
    assert [se.episode.id for se in three] == [se.episode.id for se in ten[:3]], "the same ranking, cut at 3"
    assert all(se.episode.channel_id == "c1" and se.episode.role == "user" and se.episode.source_message_id
               for se in ten), "every field of a returned message, not only what ranking reads"
    assert [se.score for se in ten] == sorted((se.score for se in ten), reverse=True)
