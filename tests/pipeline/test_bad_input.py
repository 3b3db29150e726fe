"""Bad input gets a clear error and a dead letter; the process keeps serving."""

import json

import anyio
import pytest
from nats.errors import MaxPayloadError
from nats.js.api import DiscardPolicy

from mnemobus.shared import subjects
from mnemobus.shared.envelope import EpisodeMessage, Reply
from tests.pipeline.conftest import ask, dead_letters, request, wait_for_episodes

pytestmark = pytest.mark.anyio


async def _raw(rt, data: bytes) -> dict:
    msg = await rt.bus.request(subjects.SKILL_REQUEST, data, timeout_s=5)
    return json.loads(msg.data)


async def _still_serving(rt) -> None:
    assert (await ask(rt, request("still there?")))["content"].startswith("Noted")


async def test_malformed_json_gets_an_error_reply_naming_the_problem(pipeline):
    reply = await _raw(pipeline, b'{"payload": ')
    assert reply["reason"] == "malformed_json" and "not valid JSON" in reply["error"]
    await _still_serving(pipeline)


async def test_malformed_json_is_dead_lettered_with_its_reason(pipeline):
    await _raw(pipeline, b"not json at all")
    letters = await dead_letters(pipeline, subjects.UNROUTED_GROUP)
    assert letters[0].letter.reason == "malformed_json" and letters[0].letter.data == "not json at all"


async def test_missing_field_is_named_in_the_error(pipeline):
    reply = await _raw(pipeline, json.dumps({"payload": {"meta": {"agentId": "echo"}}}).encode())
    assert reply["reason"] == "missing_field" and "payload.content" in reply["error"]
    await _still_serving(pipeline)


async def test_wrong_type_is_named_in_the_error(pipeline):
    body = {"payload": {"content": ["not", "a", "string"], "meta": {"agentId": "echo"}}}
    reply = await _raw(pipeline, json.dumps(body).encode())
    assert reply["reason"] == "schema_error" and "payload.content" in reply["error"]
    await _still_serving(pipeline)


async def test_payload_over_the_configured_limit_is_refused_and_dead_lettered(pipeline):
    body = request("small").model_dump(by_alias=True, mode="json")
    body["payload"]["content"] = "x" * (pipeline.settings.nats.max_message_bytes + 10)
    big = json.dumps(body).encode()
    reply = await _raw(pipeline, big)
    assert reply["reason"] == "payload_too_large" and str(pipeline.settings.nats.max_message_bytes) in reply["error"]
    letters = await dead_letters(pipeline, subjects.UNROUTED_GROUP)
    assert letters[0].letter.data_bytes == len(big) and letters[0].letter.truncated
    await _still_serving(pipeline)


async def test_payload_over_the_server_maximum_fails_at_the_publisher_with_a_clear_error(pipeline):
    with pytest.raises(MaxPayloadError):
        await pipeline.bus.publish(subjects.SKILL_REQUEST, b"x" * (pipeline.bus.max_payload + 1))
    await _still_serving(pipeline)


@pytest.mark.parametrize("bad_group", ["user:josh", "user/josh"])
async def test_episode_with_an_unsafe_group_id_is_dead_lettered_not_stored(pipeline, bad_group):
    episode = EpisodeMessage(episode_id="e1", group_id=bad_group, content="hi", source_message_id="m1")
    await pipeline.bus.js_publish(f"{subjects.EPISODE_PREFIX}.poison", episode.to_wire())
    letters = await dead_letters(pipeline, "poison")
    assert letters[0].letter.reason == "invalid_group_id"
    assert repr(bad_group[4]) in letters[0].letter.error
    assert await pipeline.engine.store.count_episodes() == 0


async def test_request_that_makes_a_handler_raise_is_counted_and_the_next_one_served(pipeline, monkeypatch):
    from plugins.memory import plugin as plugin_module

    calls = {"n": 0}
    real = plugin_module.MemoryPlugin._execute

    async def flaky(self, ctx, enriched, agent_id):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return await real(self, ctx, enriched, agent_id)

    monkeypatch.setattr(plugin_module.MemoryPlugin, "_execute", flaky)
    reply = await ask(pipeline, request("first"))
    assert reply["reason"] == "handler_error" and "boom" in reply["error"]
    assert pipeline.metrics.messages.labels(endpoint="skill_request", outcome="error")._value.get() == 1
    await _still_serving(pipeline)


async def test_poison_episodes_between_good_ones_leave_the_good_ones_stored(pipeline):
    good = [EpisodeMessage(episode_id=f"g{i}", group_id="user_josh", content=f"good {i}", source_message_id=f"m{i}")
            for i in range(5)]
    for i, ep in enumerate(good):
        await pipeline.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire())
        await pipeline.bus.js_publish(subjects.episode("user_josh"), b"{broken json " + str(i).encode())
    assert await wait_for_episodes(pipeline, "user_josh", 5) == 5
    letters = await dead_letters(pipeline, "user_josh", n=5)
    assert len(letters) == 5 and {lt.letter.reason for lt in letters} == {"malformed_json"}


async def test_long_messages_are_recalled_on_their_end_and_never_open_the_breaker(pipeline):
    from mnemobus.shared.limits import MAX_QUERY_CHARS

    await ask(pipeline, request("I moved from Berlin to London last month"))
    assert await wait_for_episodes(pipeline, "user_josh", 1) == 1
    pasted = "log line\n" * (MAX_QUERY_CHARS // 5) + "Where do I live now?"
    breaker_limit = pipeline.settings.memory.breaker_failures
    replies = [await ask(pipeline, request(pasted)) for _ in range(breaker_limit + 1)]
    assert [r["memory"]["status"] for r in replies] == ["enriched"] * (breaker_limit + 1)
    assert "London" in replies[-1]["memory"]["block"]
    assert sum(s._value.get() for s in pipeline.metrics.fail_open._metrics.values()) == 0


async def test_a_blank_request_is_answered_and_counted_but_never_becomes_an_episode(pipeline):
    reply = await ask(pipeline, request("   \n "))
    assert reply.get("error") is None
    assert pipeline.metrics.episodes_not_formed.labels(reason="blank_content")._value.get() == 1
    assert await pipeline.engine.store.count_episodes("user_josh") == 0


async def test_an_agent_answer_over_the_content_limit_is_stored_cut_and_marked(pipeline, monkeypatch):
    from mnemobus.shared.limits import MAX_CONTENT_CHARS, TRUNCATION_MARK
    from plugins.memory import plugin as plugin_module

    monkeypatch.setattr(plugin_module, "_read_executor_reply", lambda _data: ("long answer " * 10_000, None))
    req = request("tell me everything")
    await ask(pipeline, req)
    assert await wait_for_episodes(pipeline, "user_josh", 1) == 1
    [episode] = await pipeline.engine.store.episodes("user_josh", 1)
    assert len(episode.response) == MAX_CONTENT_CHARS and episode.response.endswith(TRUNCATION_MARK)


@pytest.mark.parametrize("topic", ["has space", "wild.*", "memory.episode.user_josh", "agent.skill.request", "$SYS.x"])
async def test_a_reply_topic_one_cannot_or_may_not_publish_on_is_refused_before_anything_runs(pipeline, topic):
    body = request("I live in Oslo").model_dump(by_alias=True, mode="json")
    body["reply"] = {"topic": topic}
    reply = await _raw(pipeline, json.dumps(body).encode())
    assert reply["reason"] == "schema_error" and "reply.topic" in reply["error"]
    letters = await dead_letters(pipeline, subjects.UNROUTED_GROUP)
    assert letters[0].letter.reason == "schema_error"
    assert await pipeline.engine.store.count_episodes("user_josh") == 0


async def test_an_answer_that_cannot_be_published_still_leaves_the_exchange_in_memory(pipeline, monkeypatch):
    real = pipeline.bus.publish

    async def refuse_the_extra_topic(subject, data, headers=None):
        if subject == "client.replies":
            raise RuntimeError("connection hiccup")
        await real(subject, data, headers)

    monkeypatch.setattr(pipeline.bus, "publish", refuse_the_extra_topic)
    req = request("I live in Oslo")
    req.reply = Reply(topic="client.replies")
    assert (await ask(pipeline, req))["content"].startswith("Noted")
    assert await wait_for_episodes(pipeline, "user_josh", 1) == 1
    assert pipeline.metrics.reply_errors._value.get() == 1


async def test_a_dead_letter_the_stream_refuses_is_counted_and_the_requester_still_told(pipeline):
    config = (await pipeline.bus.js.stream_info(subjects.DLQ_STREAM)).config
    config.max_msgs, config.discard = 1, DiscardPolicy.NEW  # room for one dead letter, the next is refused
    await pipeline.bus.js.update_stream(config)
    sample = pipeline.metrics.registry.get_sample_value
    for data in (b"not json at all", b"not json either"):
        assert (await _raw(pipeline, data))["reason"] == "malformed_json"  # the requester is told either way
    with anyio.move_on_after(5):  # the error reply goes out first, the dead letter after it
        while not sample("mnemobus_dead_letter_errors_total", {"reason": "malformed_json"}):
            await anyio.sleep(0.02)
    assert sample("mnemobus_dead_letter_errors_total", {"reason": "malformed_json"}) == 1
    assert sample("mnemobus_dead_letters_total", {"reason": "malformed_json"}) == 1  # only the one kept
    await _still_serving(pipeline)


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
async def test_a_request_time_outside_the_calendar_once_in_utc_is_refused_at_the_door(pipeline, when):
    body = request("I live in Oslo").model_dump(by_alias=True, mode="json")
    body["timestamp"] = when
    reply = await _raw(pipeline, json.dumps(body).encode())
    assert reply["reason"] == "schema_error" and "timestamp" in reply["error"]
    assert "outside years 1 to 9999 once in UTC" in reply["error"]
    assert (await dead_letters(pipeline, subjects.UNROUTED_GROUP))[0].letter.reason == "schema_error"
    assert await pipeline.engine.store.count_episodes("user_josh") == 0


async def test_four_byte_characters_are_counted_in_bytes_so_the_exchange_is_stored_not_dead_lettered(pipeline,
                                                                                                      monkeypatch):
    from mnemobus.shared.limits import TRUNCATION_MARK
    from plugins.memory import plugin as plugin_module

    said = "\U0001F600" * 16_000  # 64,000 bytes: within the characters allowed, and the request fits the bus
    monkeypatch.setattr(plugin_module, "_read_executor_reply", lambda _data: (said, None))
    await ask(pipeline, request(said))
    assert await wait_for_episodes(pipeline, "user_josh", 1) == 1
    [episode] = await pipeline.engine.store.episodes("user_josh", 1)
    assert episode.content == said
    assert episode.response.endswith(TRUNCATION_MARK) and len(episode.response.encode()) < 4_000
    assert pipeline.metrics.episodes_dead_lettered.labels(reason="payload_too_large")._value.get() == 0
