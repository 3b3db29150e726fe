"""What the worker learns from real exchanges through the bus: facts per speaker, and the extraction metrics."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest

from mnemobus.store.model import RecallQuery
from tests.pipeline.conftest import ask, request, wait_for_episodes

pytestmark = pytest.mark.anyio


async def facts_now(rt, group: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.fact for f in await rt.engine.facts_as_of(group, datetime.now(UTC))}


async def test_each_speaker_keeps_their_own_facts_from_request_to_recall(pipeline):
    await ask(pipeline, request("My sister Anna works at Siemens.", user="111"))  # josh, "Josh" in users.yaml
    await ask(pipeline, request("I live in Oslo.", user="222"))  # someone the registry does not know
    await wait_for_episodes(pipeline, "user_josh", 1)
    await wait_for_episodes(pipeline, "user_discord_222", 1)
    assert await facts_now(pipeline, "user_josh") == {"Anna is Josh's sister", "Anna works at Siemens"}
    assert await facts_now(pipeline, "user_discord_222") == {"User lives in Oslo"}
    reply = await ask(pipeline, request("Where does my sister work?", user="111"))
    assert "Anna works at Siemens" in reply["memory"]["block"] and "Oslo" not in reply["memory"]["block"]


async def test_the_users_name_from_the_registry_is_their_entity(pipeline):
    await ask(pipeline, request("I play the cello.", user="111"))
    await wait_for_episodes(pipeline, "user_josh", 1)
    josh = await pipeline.engine.find_entity("user_josh", "josh")
    result = await pipeline.engine.recall(RecallQuery("what does Josh play?", ("user_josh",)))
    assert josh is not None and josh.type == "person"
    assert [sf.fact.fact for sf in result.facts][:1] == ["Josh plays cello"]


async def test_the_worker_counts_facts_per_episode_empty_episodes_and_extractor_time(pipeline):
    await ask(pipeline, request("I adopted a cat called Miso.", user="111"))
    await ask(pipeline, request("hello there", user="111"))
    await wait_for_episodes(pipeline, "user_josh", 2)
    registry, offline = pipeline.metrics.registry, {"extractor": "offline"}
    with anyio.move_on_after(5):  # the episode is counted just after it is stored
        while registry.get_sample_value("mnemobus_extraction_facts_per_episode_count", offline) != 4:
            await anyio.sleep(0.02)
    # two episodes in each of josh's two groups; the cat gives two facts (has_pet, is_a), the greeting none
    assert registry.get_sample_value("mnemobus_extraction_facts_per_episode_count", offline) == 4
    assert registry.get_sample_value("mnemobus_extraction_facts_per_episode_sum", offline) == 4
    assert registry.get_sample_value("mnemobus_extraction_empty_episodes_total", offline) == 2
    assert registry.get_sample_value("mnemobus_extraction_duration_seconds_count", offline) >= 1


async def test_news_told_in_passing_is_recalled_with_when_it_happened(pipeline):
    await ask(pipeline, request("Oh btw, I went hiking last week and I mentor a teen at the youth club.", user="111"))
    await wait_for_episodes(pipeline, "user_josh", 1)
    result = await pipeline.engine.recall(RecallQuery("when did Josh go hiking?", ("user_josh",)))
    facts = {sf.fact.fact: sf.fact for sf in result.facts}
    assert "Josh went hiking" in facts and "Josh mentors teen" in await facts_now(pipeline, "user_josh")
    days_ago = (datetime.now(UTC) - facts["Josh went hiking"].valid_at).days
    assert 7 <= days_ago <= 13  # "last week": the Monday of the week before the message
