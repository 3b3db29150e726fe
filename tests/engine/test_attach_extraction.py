"""Ingestor.attach: an extraction made elsewhere written as what a stored episode said (the oracle-facts
diagnostic of bench_graph_recall), by ingestion's own rules."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine_support import make_episode
from mnemobus.engine import MemoryEngine
from mnemobus.engine.extract import ExtractedEntity, ExtractedFact, Extraction
from mnemobus.engine.ingest import Ingestor

pytestmark = pytest.mark.anyio

ORACLE = Extraction(
    entities=(ExtractedEntity("Caroline", "person"), ExtractedEntity("support group")),
    facts=(ExtractedFact("Caroline", "about", "support group", "semantic",
                         "Caroline attended an LGBTQ support group.", confidence=1.0, subject_type="person"),),
    extractor="oracle",
)


async def test_attach_sources_the_facts_from_the_stored_episode_and_links_its_entities(engine: MemoryEngine) -> None:
    turn = make_episode("g", "Wow, that was so powerful!", msg="D1:3")
    await engine.ingest(turn)
    outcome = await Ingestor(engine.store, engine.extractor, engine.embedder).attach(turn, ORACLE)
    assert (outcome.entities, outcome.facts_added) == (2, 1)
    facts = await engine.store.episode_facts("g", [turn.id])
    assert [(f.subject_name, f.object_name, f.source_message_ids) for f in facts] == [
        ("Caroline", "support group", ("D1:3",))]
    group_entity = await engine.find_entity("g", "support group")
    assert group_entity is not None
    links = await engine.store.entity_links("g", [group_entity.id], as_of=datetime.now(UTC), per_entity=10)
    assert [ep for _, ep in links.mentions] == [turn.id]


async def test_attaching_the_same_extraction_to_a_second_episode_reinforces_the_fact(engine: MemoryEngine) -> None:
    first = make_episode("g", "Wow, that was so powerful!", msg="D1:3")
    second = make_episode("g", "It was so powerful.", days=0.001, msg="D1:4")
    await engine.ingest_many([first, second])
    ingestor = Ingestor(engine.store, engine.extractor, engine.embedder)
    await ingestor.attach(first, ORACLE)
    outcome = await ingestor.attach(second, ORACLE)
    assert (outcome.facts_added, outcome.facts_reinforced) == (0, 1)
    assert await engine.store.count_facts("g") == 1
