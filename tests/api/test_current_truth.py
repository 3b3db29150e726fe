"""Current truth through the Graphiti door: what a later message ends is no longer answered as held, whichever
words either message used; a denial never confirms; one-value relations keep one value, many-value ones all."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def held(api: Api, group: str, query: str) -> dict[str, float]:
    """The current facts POST /search answers (facts only), sentence -> confidence."""
    r = await api.http.post("/search", json={"group_ids": [group], "query": query, "include_episodes": False,
                                             "max_facts": 20}, headers=api.auth)
    assert r.status_code == 200, r.text
    return {f["fact"]: f["confidence"] for f in r.json()["facts"] if f["invalid_at"] is None}


async def test_a_divorce_told_with_the_other_named_first_ends_the_marriage(api: Api, group_id: str) -> None:
    await api.say(group_id, "My husband Tomasz is a carpenter.")
    assert "Tomasz is tester's husband" in await held(api, group_id, "Tomasz husband married")
    await api.say(group_id, "Tomasz and I got divorced in March.")
    assert "Tomasz is tester's husband" not in await held(api, group_id, "Tomasz husband married")


async def test_no_longer_ends_a_diet_and_never_raises_its_confidence(api: Api, group_id: str) -> None:
    await api.say(group_id, "I'm vegetarian.")
    assert (await held(api, group_id, "vegetarian diet")).get("tester is vegetarian") == 0.8
    await api.say(group_id, "I'm not vegetarian any more.")
    assert "tester is vegetarian" not in await held(api, group_id, "vegetarian diet")


async def test_a_new_diet_ends_the_old_one(api: Api, group_id: str) -> None:
    await api.say(group_id, "I'm vegan.")
    await api.say(group_id, "These days I'm pescatarian.")
    facts = await held(api, group_id, "vegan pescatarian diet")
    assert "tester is pescatarian" in facts and "tester is vegan" not in facts


# (what was said, what ends it, the fact that must no longer be held, a query that finds it)
ENDINGS = {
    "a last day at an employer ends the job there": (
        "I work at Ocado.", "Thursday was my last day at Ocado.", "tester works at Ocado", "Ocado work job"),
    "leaving a company the tagger took for a place ends the job": (
        "I work for Brightwave.", "I left Brightwave in May.", "tester works at Brightwave", "Brightwave work"),
    "a pet that died is no longer kept": (
        "We have a cat called Pepper.", "Pepper died last week.", "tester has a pet, Pepper", "Pepper cat pet"),
    "a denial ends what it denies": (
        "I work for Brightwave.", "I don't work for Brightwave, I freelance.", "tester works at Brightwave",
        "Brightwave work"),
    "being taken off a medicine ends taking it": (
        "I take metformin.", "Dr Okafor took me off metformin in May.", "tester takes metformin",
        "metformin medicine"),
}


@pytest.mark.parametrize("said, ending, fact, query", list(ENDINGS.values()), ids=list(ENDINGS))
async def test_an_ending_phrase_ends_the_fact_it_names(api: Api, group_id: str, said: str, ending: str, fact: str,
                                                       query: str) -> None:
    await api.say(group_id, said)
    assert fact in await held(api, group_id, query)
    await api.say(group_id, ending)
    assert fact not in await held(api, group_id, query)


async def test_retiring_ends_the_job_and_the_employer(api: Api, group_id: str) -> None:
    await api.say(group_id, "I'm a teacher at Hillside School.")
    await api.say(group_id, "I retired last month.")
    facts = await held(api, group_id, "teacher Hillside School retired")
    assert "tester works as a teacher" not in facts and "tester works at Hillside School" not in facts
    assert "tester is retired" in facts


async def test_a_manager_named_from_either_end_is_one_relation(api: Api, group_id: str) -> None:
    await api.say(group_id, "My manager is Sunita.")
    await api.say(group_id, "These days I report to Bernd.")
    facts = await held(api, group_id, "manager report Sunita Bernd")
    assert "tester reports to Bernd" in facts and "Sunita is tester's manager" not in facts


async def test_a_new_favourite_of_a_kind_replaces_the_old(api: Api, group_id: str) -> None:
    await api.say(group_id, "My favourite film is Alien.")
    await api.say(group_id, "Heat is my favourite film now.")
    facts = await held(api, group_id, "favourite film Alien Heat")
    assert "tester's favourite film is Heat" in facts and "tester's favourite film is Alien" not in facts


async def test_languages_are_many_so_a_second_keeps_the_first(api: Api, group_id: str) -> None:
    await api.say(group_id, "I speak French.")
    await api.say(group_id, "I speak Polish.")
    facts = await held(api, group_id, "speak French Polish")
    assert {"tester speaks French", "tester speaks Polish"} <= set(facts)


async def test_a_denied_leaving_ends_nothing(api: Api, group_id: str) -> None:
    await api.say(group_id, "I work for Brightwave.")
    await api.say(group_id, "I didn't leave Brightwave, I only changed teams.")
    assert "tester works at Brightwave" in await held(api, group_id, "Brightwave work")


async def test_switching_phones_ends_the_old_phone(api: Api, group_id: str) -> None:
    await api.say(group_id, "I use an iPhone.")
    await api.say(group_id, "I switched to a Pixel last month.")
    facts = await held(api, group_id, "phone iPhone Pixel")
    assert "tester uses Pixel" in facts and "tester uses iPhone" not in facts


async def test_a_pet_rehomed_after_a_lead_verb_is_no_longer_kept(api: Api, group_id: str) -> None:
    await api.say(group_id, "We have a rabbit called Clover.")
    await api.say(group_id, "We had to rehome Clover.")
    assert "tester has a pet, Clover" not in await held(api, group_id, "Clover rabbit pet")
