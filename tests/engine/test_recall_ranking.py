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
