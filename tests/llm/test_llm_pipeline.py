"""End to end through the public door: a skill request becomes an episode, the worker extracts it with the real
local model (`extraction.extractor: llm`), the store holds the facts, and the token metrics are on the registry."""

from __future__ import annotations

import anyio
import pytest
from prometheus_client import generate_latest

from mnemobus.shared.config import Settings
from mnemobus.engine.llm import LlmExtractor

from llm_support import value
from tests.pipeline.conftest import ask, request, running, wait_for_episodes

pytestmark = pytest.mark.anyio


async def test_a_request_is_extracted_by_the_local_model_and_stored_with_its_token_metrics(settings: Settings, llama):
    settings = settings.model_copy(update={"extraction": Settings(extraction={
        "extractor": "llm",
        "llm": {"base_url": llama.url, "model": llama.model, "structured_output": "json_object_schema",
                "max_entities": 2, "max_facts": 1, "max_tokens": 320, "timeout_s": 120},
    }).extraction})
    async with running(settings) as rt:
        assert isinstance(rt.engine.extractor, LlmExtractor)
        reply = await ask(rt, request("My favourite tea is genmaicha."))
        assert reply.get("error") is None
        groups = ("user_josh", "agent_echo__user_josh")  # the exchange is remembered for the user and the pair
        for group in groups:
            assert await wait_for_episodes(rt, group, 1, timeout=120) == 1
        llm = rt.metrics.llm
        with anyio.fail_after(30):  # the episode row commits with its facts; the counters may trail the commit
            while (value(llm, "mnemobus_llm_extractions_total", extractor="llm") < 2
                   or value(llm, "mnemobus_extraction_facts_per_episode_count", extractor="llm") < 2):
                await anyio.sleep(0.05)
        stored = []
        for group in groups:
            export = await rt.engine.store.export_group(group)
            episode_ids = {e.id for e, _, _ in export.episodes}
            assert all(set(f.episode_ids) <= episode_ids for f, _ in export.facts)  # each from its own episode
            stored += [f for f, _ in export.facts]
        assert stored  # the model's facts (current, or past when it said they ended) are in the store
        assert value(llm, "mnemobus_llm_calls_total", endpoint="chat", outcome="ok") == 2  # one call per episode
        assert sum(value(llm, "mnemobus_llm_fallbacks_total", reason=r)
                   for r in ("budget", "unavailable", "timeout", "refused", "bad_response", "invalid_answer")) == 0
        exported = generate_latest(rt.metrics.registry).decode()
        assert 'mnemobus_llm_tokens_total{kind="prompt"}' in exported
        assert value(llm, "mnemobus_llm_tokens_total", kind="prompt") > 200
        assert value(llm, "mnemobus_llm_tokens_total", kind="completion") > 0


async def test_a_batch_slower_than_ack_wait_is_kept_in_progress_not_redelivered(settings: Settings, fake):
    from mnemobus.shared import subjects
    from mnemobus.shared.envelope import EpisodeMessage

    from fake_openai import answer

    slow = answer([], [{"subject": "I", "relation": "likes", "object": "tea", "fact": "User likes tea",
                        "valid_from": None, "ended": False}])
    slow.hang_s = 2.5
    fake.will(slow)
    settings = settings.model_copy(update={
        "worker": settings.worker.model_copy(update={"ack_wait_s": 1.0}),
        "extraction": Settings(extraction={"extractor": "llm", "llm": {
            "base_url": fake.url, "model": "fake", "structured_output": "json_object_schema", "timeout_s": 10}}
        ).extraction})
    async with running(settings) as rt:
        ep = EpisodeMessage(episode_id="slow-1", group_id="user_josh", content="I like tea.", source_message_id="m1")
        await rt.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire())
        with anyio.fail_after(10):
            while fake.calls < 1:  # the worker holds it now, for 2.5 s
                await anyio.sleep(0.02)
        # a second worker asking meanwhile would be handed the episode again once ack_wait (1 s) ran out
        other = await rt.bus.js.pull_subscribe_bind(durable=subjects.WORKER_DURABLE, stream=subjects.EPISODE_STREAM)
        try:
            with pytest.raises(Exception, match="[Tt]imeout"):
                await other.fetch(1, timeout=2.5)
        finally:
            await other.unsubscribe()
        assert await wait_for_episodes(rt, "user_josh", 1, timeout=30) == 1
        info = await rt.bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
        assert info.num_redelivered == 0 and fake.calls == 1
