"""How ingest applies an extraction: speakers kept apart by role and name, typed entities, endings, valid-from."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from engine_support import T0, make_episode

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.engine.extract import ExtractedEnding, ExtractedEntity, ExtractedFact, Extraction
from mnemobus.store.model import Episode
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
G = "user_a"


class Scripted:
    """Unit-test helper: the extraction each episode content maps to (ingest is under test, not an extractor)."""

    name = "scripted"

    def __init__(self, script: dict[str, Extraction]) -> None:
        self.script = script

    async def extract(self, episode: Episode) -> Extraction:
        return self.script[episode.content]


async def scripted_engine(tmp_path: Path, script: dict[str, Extraction]) -> MemoryEngine:
    store = SqliteStore(tmp_path / "memory.sqlite3", dim=HashEmbedder().dim)
    await store.open()
    return MemoryEngine(store, Scripted(script), HashEmbedder())


def said(episode: Episode, *, speaker: str | None = None, role: str = "user") -> Episode:
    return replace(episode, speaker=speaker, role=role)


async def current(engine: MemoryEngine, days: float = 30) -> set[str]:
    return {f.fact for f in await engine.facts_as_of(G, T0 + timedelta(days=days))}


async def test_two_named_speakers_keep_their_own_facts(engine: MemoryEngine) -> None:
    await engine.ingest(said(make_episode(G, "I live in Paris."), speaker="Anna"))
    await engine.ingest(said(make_episode(G, "I live in Rome.", days=1), speaker="Ben"))
    assert await current(engine) == {"Anna lives in Paris", "Ben lives in Rome"}


async def test_an_assistants_first_person_never_ends_the_users_fact(engine: MemoryEngine) -> None:
    await engine.ingest(make_episode(G, "I live in Berlin."))
    await engine.ingest(said(make_episode(G, "I live in the cloud.", days=1), role="assistant"))
    assert await current(engine) == {"User lives in Berlin"}


async def test_transcript_lines_are_said_by_the_named_speaker(engine: MemoryEngine) -> None:
    await engine.ingest(make_episode(G, "Caroline: I live in Oslo.\nMelanie: I live in Bergen."))
    assert await current(engine) == {"Caroline lives in Oslo", "Melanie lives in Bergen"}


async def test_a_person_and_a_place_of_one_name_stay_two_entities(tmp_path: Path) -> None:
    friend = ExtractedFact("Sam", "friend_of", "Jordan", "semantic", "Jordan is Sam's friend", object_type="person")
    trip = ExtractedFact("Sam", "visited", "Jordan", "temporal", "Sam visited Jordan", object_type="place")
    engine = await scripted_engine(tmp_path, {
        "a": Extraction((ExtractedEntity("Sam", "person"), ExtractedEntity("Jordan", "person")), (friend,)),
        "b": Extraction((ExtractedEntity("Sam", "person"), ExtractedEntity("Jordan", "place")), (trip,)),
    })
    await engine.ingest(make_episode(G, "a"))
    await engine.ingest(make_episode(G, "b", days=1))
    facts = await engine.facts_as_of(G, T0 + timedelta(days=2))
    assert len({f.object_id for f in facts}) == 2
    await engine.close()


async def test_the_name_a_speaker_gives_becomes_an_alias_of_their_entity(tmp_path: Path) -> None:
    me = ExtractedEntity("Josh", "person", "user", aliases=("Joshua",))
    engine = await scripted_engine(tmp_path, {"hi": Extraction((me,))})
    await engine.ingest(said(make_episode(G, "hi"), speaker="Josh"))
    found = await engine.find_entity(G, "joshua")
    assert found is not None and found.name == "Josh"
    await engine.close()


async def test_an_ending_ends_the_current_fact_at_the_message(tmp_path: Path) -> None:
    works = ExtractedFact("Kim", "works_at", "Lumen", "hierarchical", "Kim works at Lumen", object_type="organization")
    quit_ = ExtractedEnding("Kim", "works_at", "Lumen", cause="no longer", object_type="organization")
    people = (ExtractedEntity("Kim", "person"), ExtractedEntity("Lumen", "organization"))
    engine = await scripted_engine(tmp_path, {"works": Extraction(people, (works,)),
                                              "quit": Extraction(people, endings=(quit_,))})
    await engine.ingest(make_episode(G, "works"))
    outcome = await engine.ingest(make_episode(G, "quit", days=10))
    (history,) = await engine.edge_history(G, "Kim", "works_at")
    assert outcome.facts_invalidated == 1 and history.invalid_at == T0 + timedelta(days=10)
    assert await current(engine, 5) == {"Kim works at Lumen"} and await current(engine, 11) == set()
    await engine.close()


async def test_an_ending_of_a_fact_never_held_is_kept_as_past(tmp_path: Path) -> None:
    used_to = ExtractedEnding("Kim", "lives_in", "Paris", cause="used to", fact="Kim lived in Paris",
                              object_type="place")
    engine = await scripted_engine(tmp_path, {"past": Extraction(
        (ExtractedEntity("Kim", "person"), ExtractedEntity("Paris", "place")), endings=(used_to,))})
    await engine.ingest(make_episode(G, "past"))
    (history,) = await engine.edge_history(G, "Kim", "lives_in")
    assert (history.fact, history.valid_at, history.invalid_at) == ("Kim lived in Paris", None, T0)
    await engine.close()


async def test_an_ending_leaves_other_objects_of_the_relation_alone(tmp_path: Path) -> None:
    tea = ExtractedFact("Kim", "drinks", "tea", "semantic", "Kim drinks tea")
    coffee = ExtractedFact("Kim", "drinks", "coffee", "semantic", "Kim drinks coffee")
    stop = ExtractedEnding("Kim", "drinks", "coffee", cause="stopped")
    names = tuple(ExtractedEntity(n) for n in ("Kim", "tea", "coffee"))
    engine = await scripted_engine(tmp_path, {"both": Extraction(names, (tea, coffee)),
                                              "stop": Extraction(names, endings=(stop,))})
    await engine.ingest(make_episode(G, "both"))
    await engine.ingest(make_episode(G, "stop", days=1))
    assert await current(engine) == {"Kim drinks tea"}
    await engine.close()


async def test_valid_from_dates_the_fact_and_the_end_of_the_one_it_replaces(tmp_path: Path) -> None:
    oslo = ExtractedFact("Kim", "lives_in", "Oslo", "semantic", "Kim lives in Oslo", object_type="place")
    rome = ExtractedFact("Kim", "lives_in", "Rome", "semantic", "Kim lives in Rome", object_type="place",
                         valid_from=T0 + timedelta(days=20))
    names = tuple(ExtractedEntity(n, t) for n, t in (("Kim", "person"), ("Oslo", "place"), ("Rome", "place")))
    engine = await scripted_engine(tmp_path, {"oslo": Extraction(names, (oslo,)), "rome": Extraction(names, (rome,))})
    await engine.ingest(make_episode(G, "oslo"))
    await engine.ingest(make_episode(G, "rome", days=30))
    assert await current(engine, 19) == {"Kim lives in Oslo"} and await current(engine, 21) == {"Kim lives in Rome"}
    await engine.close()
