"""Every failure class of the chat endpoint, on a scripted server: exact calls, retries, fallbacks and metrics."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import anyio
import pytest
from prometheus_client import generate_latest

from mnemobus.engine.llm.endpoint import RetryPolicy
from mnemobus.store.model import Episode

from llm_support import offline_answer, value
from fake_openai import answer, chat, hang, status

pytestmark = pytest.mark.anyio

SENTENCE = "I moved from Berlin to Lisbon last month."
FACT = {"subject": "I", "relation": "lives_in", "object": "Lisbon", "fact": "Josh lives in Lisbon",
        "valid_from": None, "ended": False}


def episode(content: str = SENTENCE) -> Episode:
    return Episode("ep1", "g1", content, "user", "m1", datetime(2025, 6, 15, tzinfo=UTC))


async def offline() -> object:
    """What the offline extractor makes of the episode: the fallback's answer."""
    return await offline_answer(episode())


async def test_answer_becomes_the_extraction_and_its_tokens_are_counted(fake, make_extractor, llm_metrics):
    fake.will(answer([{"name": "Lisbon", "type": "place"}], [FACT], prompt_tokens=300, completion_tokens=40))
    got = await make_extractor(fake.url).extract(episode())
    assert [(f.subject, f.relation, f.object) for f in got.facts] == [("User", "lives_in", "Lisbon")]
    assert fake.calls == 1
    assert value(llm_metrics, "mnemobus_llm_tokens_total", kind="prompt") == 300
    assert value(llm_metrics, "mnemobus_llm_tokens_total", kind="completion") == 40
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="ok") == 1
    assert value(llm_metrics, "mnemobus_llm_extractions_total", extractor="llm") == 1


async def test_rate_limit_waits_for_retry_after_then_succeeds(fake, make_extractor, llm_metrics):
    fake.will(status(429, "slow down", {"Retry-After": "0.3"}), answer([], [FACT]))
    got = await make_extractor(fake.url).extract(episode())
    assert got.facts and fake.calls == 2
    assert fake.seen[1].at - fake.seen[0].at >= 0.3  # it waited at least as long as asked
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="rate_limited") == 1
    assert value(llm_metrics, "mnemobus_llm_retries_total", endpoint="chat", reason="rate_limited") == 1
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="unavailable") == 0


async def test_retry_after_longer_than_the_longest_backoff_falls_back_at_once(fake, make_extractor, llm_metrics):
    fake.will(status(429, "come back in an hour", {"Retry-After": "3600"}))
    got = await make_extractor(fake.url).extract(episode())
    assert got == await offline() and fake.calls == 1
    assert value(llm_metrics, "mnemobus_llm_retries_total", endpoint="chat", reason="rate_limited") == 0
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="unavailable") == 1


async def test_server_errors_are_retried_then_the_offline_extractor_takes_the_episode(fake, make_extractor, llm_metrics):
    fake.will(status(500))
    got = await make_extractor(fake.url).extract(episode())
    assert got == await offline()
    assert fake.calls == 3  # one call and max_retries=2
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="server_error") == 3
    assert value(llm_metrics, "mnemobus_llm_retries_total", endpoint="chat", reason="server_error") == 2
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="unavailable") == 1
    assert value(llm_metrics, "mnemobus_llm_extractions_total", extractor="offline_fallback") == 1


async def test_one_server_error_then_an_answer_needs_no_fallback(fake, make_extractor, llm_metrics):
    fake.will(status(503), answer([], [FACT]))
    got = await make_extractor(fake.url).extract(episode())
    assert [f.object for f in got.facts] == ["Lisbon"] and fake.calls == 2
    assert value(llm_metrics, "mnemobus_llm_retries_total", endpoint="chat", reason="server_error") == 1
    assert value(llm_metrics, "mnemobus_llm_extractions_total", extractor="llm") == 1


async def test_a_hanging_server_times_out_each_attempt_then_falls_back(fake, make_extractor, llm_metrics):
    fake.will(hang(30))
    # a second long enough for the retry to reach the server on a loaded machine: at 0.3 s it once timed out before
    # the server had read it (fake.calls 1) in a full run
    ex = make_extractor(fake.url, timeout_s=1.0, retry=RetryPolicy(max_retries=1, backoff_base_s=0.01))
    with anyio.fail_after(20):  # the test's own guard: a missing timeout would hang here
        got = await ex.extract(episode())
    assert got == await offline() and fake.calls == 2
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="timeout") == 2
    assert value(llm_metrics, "mnemobus_llm_retries_total", endpoint="chat", reason="timeout") == 1
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="timeout") == 1


async def test_a_body_that_is_not_json_is_a_bad_response_not_retried(fake, make_extractor, llm_metrics):
    fake.will(chat("x")).plan[0].body = b"<html>gateway</html>"
    got = await make_extractor(fake.url).extract(episode())
    assert got == await offline() and fake.calls == 1
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="bad_response") == 1
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="bad_response") == 1


async def test_an_answer_that_is_not_json_is_sent_back_once_with_the_error(fake, make_extractor, llm_metrics):
    fake.will(chat('{"entities": [{"name": "Lis'), answer([], [FACT]))
    got = await make_extractor(fake.url).extract(episode())
    assert [f.object for f in got.facts] == ["Lisbon"] and fake.calls == 2
    second = fake.seen[1].body["messages"]
    assert second[-2] == {"role": "assistant", "content": '{"entities": [{"name": "Lis'}
    assert "not valid JSON" in second[-1]["content"] and "cut off" in second[-1]["content"]
    assert value(llm_metrics, "mnemobus_llm_answers_total", outcome="invalid") == 1
    assert value(llm_metrics, "mnemobus_llm_answers_total", outcome="valid") == 1
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="invalid_answer") == 0


async def test_an_answer_off_the_schema_twice_falls_back(fake, make_extractor, llm_metrics):
    fake.will(chat('{"entities": 5, "facts": []}'))
    got = await make_extractor(fake.url).extract(episode())
    assert got == await offline() and fake.calls == 2
    assert "entities" in fake.seen[1].body["messages"][-1]["content"]  # the retry names the field
    assert value(llm_metrics, "mnemobus_llm_answers_total", outcome="invalid") == 2
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="invalid_answer") == 1


async def test_an_invented_candidate_id_is_an_invalid_answer(fake, make_extractor, llm_metrics):
    fake.will(answer([{"name": "Lisbon", "type": "place", "same_as": "E9"}], []))
    got = await make_extractor(fake.url).extract(episode())
    assert got == await offline()
    assert "E9" in fake.seen[1].body["messages"][-1]["content"]
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="invalid_answer") == 1


async def test_a_client_error_is_not_retried(fake, make_extractor, llm_metrics):
    fake.will(status(400, "maximum context length is 4096 tokens"))
    got = await make_extractor(fake.url).extract(episode())
    assert got == await offline() and fake.calls == 1
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="client_error") == 1
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="refused") == 1


async def test_a_closed_port_is_a_transport_error_retried_then_fallen_back(make_extractor, llm_metrics):
    from mnemobus.kernel.llama_local import free_port

    got = await make_extractor(f"http://127.0.0.1:{free_port()}/v1").extract(episode())
    assert got == await offline()
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="transport") == 3
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="unavailable") == 1


async def test_over_the_hourly_budget_the_episode_goes_offline_without_a_call(fake, make_extractor, llm_metrics):
    fake.will(answer([], [FACT], prompt_tokens=300, completion_tokens=100))
    ex = make_extractor(fake.url, tokens_per_hour=1000, max_tokens=200)
    await ex.extract(episode())  # fits: ~100 estimated prompt tokens + 200
    assert fake.calls == 1
    assert value(llm_metrics, "mnemobus_llm_budget_remaining_tokens") == pytest.approx(600, abs=2)
    await ex.extract(episode())  # 600 left fits the ~300 estimate; the call costs 400 more
    got = await ex.extract(episode())  # ~200 left: not enough for the estimate
    assert got == await offline() and fake.calls == 2
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="budget") == 1


async def test_no_more_calls_run_at_once_than_the_concurrency_cap(fake, make_extractor, llm_metrics):
    fake.will(hang(0.3))
    fake.plan[0].body = answer([], [FACT]).body
    ex = make_extractor(fake.url, concurrency=2)
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(ex.extract, episode())
    assert fake.calls == 5 and fake.max_in_flight == 2
    assert value(llm_metrics, "mnemobus_llm_extractions_total", extractor="llm") == 5
    assert value(llm_metrics, "mnemobus_llm_calls_in_flight") == 0


async def test_the_api_key_is_sent_but_never_logged_shown_or_exported(fake, make_extractor, llm_metrics, caplog):
    key = "sk-test-NEVER-SHOW-7f3a9"
    fake.will(status(401, f"Incorrect API key provided: {key}"), status(500, f"echo {key}"))
    caplog.set_level(logging.DEBUG)
    ex = make_extractor(fake.url, api_key=key)
    await ex.extract(episode())
    ex2 = make_extractor(fake.url, api_key=key)
    fake.will(status(500, f"echo {key}"))
    await ex2.extract(episode())
    assert fake.seen[0].headers["Authorization"] == f"Bearer {key}"  # it is used...
    shown = caplog.text + repr(ex.client) + repr(ex.client.endpoint) + generate_latest(llm_metrics.registry).decode()
    assert caplog.text and key not in shown  # ...and nowhere to be read
    assert "[redacted]" in caplog.text


@pytest.mark.parametrize(("mode", "expected_type", "schema_in_format", "schema_in_prompt"), [
    ("json_schema", "json_schema", False, False),
    ("json_object_schema", "json_object", True, False),
    ("json_object", "json_object", False, True),
])
async def test_each_structured_output_mode_asks_in_its_own_form(fake, make_extractor, mode, expected_type,
                                                               schema_in_format, schema_in_prompt):
    fake.will(answer([], [FACT]))
    await make_extractor(fake.url, structured_output=mode).extract(episode())
    body = fake.seen[0].body
    fmt = body["response_format"]
    assert fmt["type"] == expected_type
    assert ("schema" in fmt) == schema_in_format
    if mode == "json_schema":
        assert fmt["json_schema"]["schema"]["properties"]["facts"]["maxItems"] == 6
    assert ("Reply with JSON matching this schema" in body["messages"][1]["content"]) == schema_in_prompt
    assert body["temperature"] == 0 and body["max_tokens"] == 1024 and body["stream"] is False
