"""End to end through the public door: a skill request becomes an episode, the worker extracts it with the real
local model (`extraction.extractor: llm`), the store holds the facts, and the token metrics are on the registry."""

from __future__ import annotations

import anyio
import pytest
from prometheus_client import generate_latest

from mnemobus.config import Settings
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
        with anyio.fail_after(30):  # the episode row commits with its facts; the counter may trail the commit
            while value(llm, "mnemobus_llm_extractions_total", extractor="llm") < 2:
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

