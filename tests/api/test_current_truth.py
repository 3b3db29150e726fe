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
    "a pet rehomed after a lead verb is no longer kept": (
        "We have a rabbit called Clover.", "We had to rehome Clover.", "tester has a pet, Clover", "Clover rabbit pet"),
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


async def test_languages_are_many_so_a_second_keeps_the_first(api: Api, group_id: str) -> None:
    await api.say(group_id, "I speak French.")
    await api.say(group_id, "I speak Polish.")
    facts = await held(api, group_id, "speak French Polish")
    assert {"tester speaks French", "tester speaks Polish"} <= set(facts)


async def test_a_denied_leaving_ends_nothing(api: Api, group_id: str) -> None:
    await api.say(group_id, "I work for Brightwave.")
    await api.say(group_id, "I didn't leave Brightwave, I only changed teams.")
    assert "tester works at Brightwave" in await held(api, group_id, "Brightwave work")


# (what was said, its new value, the new fact, the old fact that must no longer be held, a query that finds both)
REPLACEMENTS = {
    "a new diet ends the old one": (
        "I'm vegan.", "These days I'm pescatarian.", "tester is pescatarian", "tester is vegan", "vegan pescatarian"),
    "a manager named from either end is one relation": (
        "My manager is Sunita.", "These days I report to Bernd.", "tester reports to Bernd",
        "Sunita is tester's manager", "manager report Sunita Bernd"),
    "a new favourite of a kind replaces the old": (
        "My favourite film is Alien.", "Heat is my favourite film now.", "tester's favourite film is Heat",
        "tester's favourite film is Alien", "favourite film Alien Heat"),
    "switching phones ends the old phone": (
        "I use an iPhone.", "I switched to a Pixel last month.", "tester uses Pixel", "tester uses iPhone",
        "phone iPhone Pixel"),
}


@pytest.mark.parametrize("said, later, new, old, query", list(REPLACEMENTS.values()), ids=list(REPLACEMENTS))
async def test_a_new_value_of_a_one_value_relation_ends_the_old(api: Api, group_id: str, said: str, later: str,
                                                                new: str, old: str, query: str) -> None:
    await api.say(group_id, said)
    await api.say(group_id, later)
    facts = await held(api, group_id, query)
    assert new in facts and old not in facts
