"""Ingestion links a turn to every entity of its group it names, whether or not its extraction found a statement
in it: what graph recall reaches a turn through."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine_support import make_episode
from mnemobus.engine import MemoryEngine

pytestmark = pytest.mark.anyio


async def mentioned_in(engine: MemoryEngine, group: str, name: str) -> list[str]:
    """The ids of the episodes linked to the entity of this name."""
    entity = await engine.find_entity(group, name)
    assert entity is not None, f"no entity {name!r}"
    links = await engine.store.entity_links(group, [entity.id], as_of=datetime.now(UTC), per_entity=10)
    return sorted(ep for _, ep in links.mentions)


async def test_a_turn_that_names_a_known_entity_without_a_statement_is_linked_to_it(engine: MemoryEngine) -> None:
    first = make_episode("g", "My sister Sofia adopted a puppy called Biscuit.", msg="m1")
    later = make_episode("g", "Biscuit chewed up my sneakers again!", days=3, msg="m2")
    await engine.ingest(first)
    outcome = await engine.ingest(later)
    assert outcome.facts_added == 0  # the extractor found no statement in it
    assert await mentioned_in(engine, "g", "Biscuit") == sorted([first.id, later.id])


async def test_a_name_links_only_to_an_entity_of_the_turns_own_group(engine: MemoryEngine) -> None:
    first = make_episode("g", "My sister Sofia adopted a puppy called Biscuit.", msg="m1")
    elsewhere = make_episode("h", "Biscuit chewed up my sneakers again!", days=3, msg="m2")
    await engine.ingest(first)
    await engine.ingest(elsewhere)
    assert await mentioned_in(engine, "g", "Biscuit") == [first.id]
