"""Ranking rules of the default recipe that no single scenario shows."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.recipes import recipe_named
from mnemobus.store.model import RecallQuery

from engine_support import T0, make_episode

pytestmark = pytest.mark.anyio
G = "user_rank"


async def test_default_recipe_does_not_rank_a_fact_higher_for_having_been_returned(engine: MemoryEngine) -> None:
    # recall counts every fact it returns, used or not: a boost on that count would feed on itself
    assert recipe_named("hybrid").retrieval_boost == 0.0
    for text in ("I like green tea.", "I like black coffee.", "I like oolong tea with honey.", "I work on the tea shop."):
        await engine.ingest(make_episode(G, text))
    query = RecallQuery("which tea do I like?", (G,), as_of=T0 + timedelta(days=1), max_facts=2)
    first = await engine.recall(query)
    assert first.facts
    for _ in range(20):
        again = await engine.recall(query)
    assert [(sf.fact.id, sf.score) for sf in again.facts] == [(sf.fact.id, sf.score) for sf in first.facts]


async def _talk(engine: MemoryEngine, *texts: str, gap_s: float = 1.0) -> list[str]:
    eps = [make_episode(G, text, at=T0 + timedelta(seconds=i * gap_s)) for i, text in enumerate(texts)]
    for ep in eps:
        await engine.ingest(ep)
    return [ep.id for ep in eps]


def _messages(result) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    return [(se.episode.id, se.score) for se in result.episodes]


async def test_a_recalled_message_lends_its_reply_a_share_of_its_score(engine: MemoryEngine) -> None:
    before, hit, reply = await _talk(engine, "Good morning.", "Where did the otters nest this year?",
                                     "Down by the old mill, same as last spring.")
    found = dict(_messages(await engine.recall(RecallQuery("otters", (G,), recipe="text", as_of=T0 + timedelta(days=1)))))
    text = recipe_named("text")  # words only: the neighbours match nothing on their own
    assert found[reply] == pytest.approx(found[hit] * text.context_after)
    assert found[before] == pytest.approx(found[hit] * text.context_before)


async def test_a_lent_score_never_passes_further_than_the_span(engine: MemoryEngine) -> None:
    hit, reply, after_reply = await _talk(engine, "Where did the otters nest?", "By the mill.", "Lovely weather.")
    found = dict(_messages(await engine.recall(RecallQuery("otters", (G,), recipe="text", as_of=T0 + timedelta(days=1)))))
    assert reply in found and after_reply not in found


async def test_a_turn_from_another_conversation_hour_gets_no_share(engine: MemoryEngine) -> None:
    hit, later = await _talk(engine, "Where did the otters nest?", "By the mill.", gap_s=2 * 3600)
    found = dict(_messages(await engine.recall(RecallQuery("otters", (G,), recipe="text", as_of=T0 + timedelta(days=1)))))
    assert hit in found and later not in found


async def test_a_turn_said_after_the_as_of_time_is_not_lent_a_score(engine: MemoryEngine) -> None:
    hit, reply = await _talk(engine, "Where did the otters nest?", "By the mill.", gap_s=60)
    found = dict(_messages(await engine.recall(RecallQuery("otters", (G,), recipe="text", as_of=T0 + timedelta(seconds=30)))))
    assert hit in found and reply not in found
