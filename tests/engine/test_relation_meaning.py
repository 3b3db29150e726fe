"""The semantic fallback of relation mapping: a relation no table row names is read as the row nearest in meaning,
on the local sentence model; names that hold a past, a plan or another meaning keep their own."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemobus.engine.embed import MODELS, CachedEmbedder, LocalOnnxEmbedder
from mnemobus.engine.extract import ExtractedEntity, ExtractedFact, Extraction
from mnemobus.engine.relation_meaning import THRESHOLD, RelationMeaning, said_now
from mnemobus.engine.relations import canonical_extraction
from mnemobus.kernel.backends import open_engine, shared_meaning
from mnemobus.shared.config import Settings
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode


@pytest.fixture(scope="module")
def meaning() -> RelationMeaning:
    return RelationMeaning(CachedEmbedder(LocalOnnxEmbedder()), THRESHOLD)


def test_a_name_the_table_lacks_is_read_as_the_relation_it_means(meaning: RelationMeaning) -> None:
    assert (meaning.nearest("works_full_time_at", "organization"), meaning.nearest("makes_his_home_in", "place")) == (
        "works_at", "lives_in")


def test_a_name_in_the_past_is_never_read_as_what_holds_now(meaning: RelationMeaning) -> None:
    assert [meaning.nearest(r, t) for r, t in (("lived_in", "place"), ("worked_at", "organization"))] == [None, None]


def test_a_wish_or_plan_is_not_what_holds_now(meaning: RelationMeaning) -> None:
    assert meaning.nearest("wants_to_live_in", "place") is None


def test_a_participle_after_is_says_now_and_alone_says_the_past() -> None:
    assert (said_now("is_employed_at_firm"), said_now("employed_at_firm")) == (True, False)


def test_a_near_name_with_another_meaning_keeps_its_own(meaning: RelationMeaning) -> None:
    assert (meaning.nearest("lives_near", "place"), meaning.nearest("moved_from", "place")) == (None, None)


def test_only_rows_that_fit_the_objects_type_compete(meaning: RelationMeaning) -> None:
    assert meaning.nearest("has_a_job_as", "concept") == "works_as"


def test_a_relation_meant_as_itself_is_never_remapped(meaning: RelationMeaning) -> None:
    assert [meaning.nearest(r, "place") for r in ("visited", "born_in", "works_in")] == [None, None, None]


def test_a_threshold_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="threshold"):
        RelationMeaning(CachedEmbedder(LocalOnnxEmbedder()), 1.5)


def test_an_extraction_carries_the_read_relation_and_keeps_the_words_said(meaning: RelationMeaning) -> None:
    fact = ExtractedFact("Mara", "relishes", "spicy food", "semantic", "Mara relishes spicy food")
    (got,) = canonical_extraction(Extraction((ExtractedEntity("Mara", "person", "user"),), (fact,)),
                                  meaning.nearest).facts
    assert (got.relation, got.fact) == ("likes", "Mara relishes spicy food")


@pytest.mark.anyio
async def test_the_fallbacks_model_loads_when_the_process_first_ingests_not_when_it_opens_an_engine(
        tmp_path: Path) -> None:
    """A process that only recalls (the plugin) must not carry the sentence model (~0.9 s, ~280 MB)."""
    settings = Settings(store={"backend": "sqlite", "sqlite_path": tmp_path / "m.sqlite3"},
                        memory={"embedding": {"provider": "hash"}}, extraction={"relation_threshold": 0.71})
    engine = await open_engine(settings)
    try:
        meaning = shared_meaning(next(iter(MODELS)), 0.71)
        opened = meaning._vectors is not None
        await engine.ingest(Episode(id="e1", group_id=GroupId("g_meaning"), content="I relish spicy food.",
                                    role="user", source_message_id="m1", reference_time=datetime.now(UTC)))
        assert (opened, meaning._vectors is not None) == (False, True)
    finally:
        await engine.close()
