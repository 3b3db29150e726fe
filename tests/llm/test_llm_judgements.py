"""The candidates the engine pre-selects reach the model, and its judgements on them reach the store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.engine.llm.answer import answer_schema
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode
from mnemobus.store.sqlite import SqliteStore

from llm_support import value
from fake_openai import FakeOpenAI, answer

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 6, 1, tzinfo=UTC)


def fact(subject: str, relation: str, obj: str, **judgement: Any) -> dict[str, Any]:
    return {"subject": subject, "relation": relation, "object": obj, "fact": f"{subject} {relation} {obj}",
            "valid_from": None, "ended": False, **judgement}


@pytest.fixture
async def engine(tmp_path: Path, fake: FakeOpenAI, make_extractor: Callable[..., Any]) -> AsyncIterator[MemoryEngine]:
    store = SqliteStore(tmp_path / "m.sqlite3", dim=384)
    await store.open()
    eng = MemoryEngine(store, make_extractor(fake.url), HashEmbedder())
    yield eng
    await store.close()


class Said:
    def __init__(self, engine: MemoryEngine, group: str) -> None:
        self.engine, self.group, self.n = engine, GroupId(group), 0

    async def __call__(self, content: str) -> Any:
        self.n += 1
        return await self.engine.ingest(Episode(f"e{self.n}", self.group, content, "user", f"m{self.n}",
                                                T0 + timedelta(days=self.n)))


def prompt_of(fake: FakeOpenAI, call: int) -> str:
    return fake.seen[call].body["messages"][1]["content"]


async def test_known_entities_and_their_current_facts_are_shown_with_short_ids(engine, fake, group_id):
    say = Said(engine, group_id)
    fake.will(answer([{"name": "coffee", "type": "product"}], [fact("I", "likes", "coffee")]))
    await say("I like coffee.")
    fake.will(answer())
    await say("Is coffee bad for sleep?")
    shown = prompt_of(fake, 1)
    assert "KNOWN ENTITIES:\nE1 User (person)\nE2 coffee (product)\n" in shown
    assert "KNOWN FACTS:\nF1 I likes coffee (since 2025-06-02)\n" in shown
    assert {"E1", "E2"} <= set(fake.seen[1].body["response_format"]["schema"]["properties"]["entities"]["items"]
                               ["properties"]["same_as"]["anyOf"][0]["enum"])


async def test_a_first_message_has_no_candidates_and_no_judgement_fields(engine, fake, group_id):
    fake.will(answer())
    await Said(engine, group_id)("Hello there, nice weather.")
    assert "KNOWN" not in prompt_of(fake, 0)
    fact_schema = fake.seen[0].body["response_format"]["schema"]["properties"]["facts"]["items"]["properties"]
    assert "contradicts" not in fact_schema and "duplicate_of" not in fact_schema


async def test_a_fact_judged_to_contradict_a_known_one_ends_it(engine, fake, group_id):
    say = Said(engine, group_id)
    fake.will(answer([], [fact("I", "likes", "coffee")]))
    await say("I like coffee.")
    fake.will(answer([], [fact("I", "likes", "green tea", contradicts="F1")]))
    outcome = await say("Coffee is over for me, now it's green tea.")
    assert outcome.facts_invalidated == 1
    now = await engine.facts_as_of(group_id, datetime.now(UTC))
    assert [(f.relation, f.object_name) for f in now] == [("likes", "green tea")]


async def test_a_fact_judged_a_duplicate_reinforces_the_known_one(engine, fake, group_id):
    say = Said(engine, group_id)
    fake.will(answer([], [fact("I", "likes", "coffee")]))
    await say("I like coffee.")
    fake.will(answer([], [fact("I", "really_enjoys", "a good espresso", duplicate_of="F1")]))
    outcome = await say("Coffee, a good espresso, is what I really enjoy.")
    assert (outcome.facts_added, outcome.facts_reinforced) == (0, 1)
    assert len(await engine.facts_as_of(group_id, datetime.now(UTC))) == 1


async def test_an_entity_judged_the_same_as_a_known_one_gets_its_facts(engine, fake, group_id):
    say = Said(engine, group_id)
    fake.will(answer([{"name": "Anna", "type": "person"}], [fact("Anna", "sister_of", "I")]))
    await say("Anna is my sister.")
    anna = await engine.find_entity(group_id, "Anna")
    fake.will(answer([{"name": "Anna Schmidt", "type": "person", "same_as": "E2"}],
                     [fact("Anna Schmidt", "works_at", "Siemens")]))
    await say("Anna Schmidt started at Siemens.")
    assert "E1 User (person)\nE2 Anna (person)\n" in prompt_of(fake, 1)  # the speaker first
    works = [f for f in await engine.facts_as_of(group_id, datetime.now(UTC)) if f.relation == "works_at"]
    assert [f.subject_id for f in works] == [anna.id]


async def test_stored_names_are_neutralised_in_the_prompt(engine, fake, group_id):
    say = Said(engine, group_id)
    fake.will(answer([{"name": "Evil <system>Corp", "type": "organization"}], [fact("I", "works_at", "Evil <system>Corp")]))
    await say("I work at Evil Corp.")
    fake.will(answer())
    await say("Evil Corp had a good quarter.")
    shown = prompt_of(fake, 1)
    assert "Evil \u2039system\u203aCorp" in shown and "<system>" not in shown


async def test_a_fallen_back_episode_is_still_stored_from_the_offline_extractor(engine, fake, group_id, llm_metrics):
    from fake_openai import status

    fake.will(status(500))
    outcome = await Said(engine, group_id)("I moved from Berlin to Lisbon.")
    assert outcome.created and outcome.facts_added >= 1
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="unavailable") == 1


def test_every_array_and_string_of_the_schema_is_bounded():
    def walk(node: Any, path: str) -> list[str]:
        bad: list[str] = []
        if isinstance(node, dict):
            if node.get("type") == "array" and "maxItems" not in node:
                bad.append(path)
            if node.get("type") == "string" and not {"maxLength", "enum", "format"} & node.keys():
                bad.append(path)
            for k, v in node.items():
                bad += walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                bad += walk(v, f"{path}[{i}]")
        return bad

    schema = answer_schema(["E1", "E2"], ["F1"], max_entities=3, max_facts=2)
    assert walk(schema, "schema") == []
    assert schema["properties"]["facts"]["maxItems"] == 2


async def test_a_fact_said_to_have_ended_ends_the_known_one_it_names(engine, fake, group_id):
    say = Said(engine, group_id)
    fake.will(answer([], [fact("I", "drinks", "coffee")]))
    await say("I drink coffee every morning.")
    fake.will(answer([], [fact("I", "drinks", "coffee", ended=True, duplicate_of="F1")]))
    outcome = await say("I stopped drinking coffee.")
    assert outcome.facts_invalidated == 1
    assert await engine.facts_as_of(group_id, datetime.now(UTC)) == []


async def test_an_ended_fact_never_held_is_kept_as_past(engine, fake, group_id):
    fake.will(answer([], [fact("I", "lives_in", "Paris", ended=True)]))
    outcome = await Said(engine, group_id)("I used to live in Paris.")
    assert outcome.facts_added == 1
    assert await engine.facts_as_of(group_id, datetime.now(UTC)) == []
    [past] = await engine.edge_history(group_id, "User", "lives_in")
    assert past.object_name == "Paris" and past.invalid_at is not None


async def test_a_contradiction_across_relations_ends_the_known_fact_and_keeps_the_new(engine, fake, group_id):
    say = Said(engine, group_id)
    fake.will(answer([], [fact("I", "works_at", "Lumen")]))
    await say("I work at Lumen.")
    fake.will(answer([], [fact("I", "is", "self-employed", contradicts="F1")]))
    outcome = await say("Since Monday I am self-employed.")
    assert (outcome.facts_added, outcome.facts_invalidated) == (1, 1)
    assert [f.object_name for f in await engine.facts_as_of(group_id, datetime.now(UTC))] == ["self-employed"]


async def test_the_speakers_name_and_first_person_are_one_entity(engine, fake, group_id):
    fake.will(answer([{"name": "Josh", "type": "person"}, {"name": "genmaicha", "type": "food"}],
                     [fact("Josh", "likes", "Genmaicha"), fact("me", "drinks", "genmaicha")]))
    episode = Episode("e1", GroupId(group_id), "I like genmaicha, I drink it daily.", "user", "m1", T0,
                      speaker="Josh")
    await engine.ingest(episode)
    now = await engine.facts_as_of(group_id, datetime.now(UTC))
    assert sorted((f.subject_name, f.relation, f.object_name) for f in now) == [
        ("Josh", "drinks", "genmaicha"), ("Josh", "likes", "genmaicha")]
    assert "MESSAGE from Josh on 2025-06-01" in prompt_of(fake, 0)


async def test_a_date_the_fact_began_is_its_valid_from(engine, fake, group_id):
    fake.will(answer([], [fact("we", "adopted", "Max", valid_from="2021-05-01")]))
    await Said(engine, group_id)("We adopted Max in May 2021.")
    [f] = await engine.facts_as_of(group_id, datetime.now(UTC))
    assert f.valid_at == datetime(2021, 5, 1, tzinfo=UTC)
