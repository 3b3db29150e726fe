"""Every class of poison message, inside a batch of good ones, on every subject the pipeline consumes:
the good ones are all served or stored, each poison one is answered and dead-lettered with its reason,
counted exactly, and nothing kills a consumer."""

from __future__ import annotations

import json

import anyio

import pytest

from mnemobus.shared import subjects
from mnemobus.bus.dlq import list_letters
from mnemobus.shared.envelope import EpisodeMessage
from tests.bus_counts import worker_settled
from tests.pipeline.conftest import dead_letters, request, wait_for_episodes

pytestmark = pytest.mark.anyio

GROUP = "user_poison"


def _episode(i: int, **fields: object) -> dict:
    body = EpisodeMessage(episode_id=f"good-{i}", group_id=GROUP, content=f"good episode {i}",
                          source_message_id=f"m{i}").model_dump(by_alias=True, mode="json")
    body.update(fields)
    return body


def _json(body: object) -> bytes:
    return json.dumps(body).encode()


def _near_server_max(rt) -> int:
    """The largest content the server still carries (its max_payload, less room for the envelope)."""
    return min(1024 * 1024, rt.bus.max_payload - 2048)


def _poison_episodes(max_bytes: int, biggest: int) -> dict[str, tuple[bytes, str]]:
    """name -> (raw message, the reason its dead letter must carry)."""
    nested = b'{"episodeId": "p1", "groupId": "' + GROUP.encode() + b'", "x": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    huge_int = _json(_episode(900))[:-1] + b', "n": ' + b"9" * 5_000 + b"}"
    return {
        "deeply nested": (nested, "malformed_json"),
        "huge integer": (huge_int, "malformed_json"),
        "invalid utf-8": (b'{"episodeId": "p3", "content": "\xff\xfe"}', "malformed_json"),
        "lone surrogate": (_json(_episode(901, content="bad \ud800 text")), "invalid_unicode"),
        "wrong type": (_json(_episode(902, content=12345)), "schema_error"),
        "missing field": (_json({"episodeId": "p6", "groupId": GROUP}), "missing_field"),
        "blank content": (_json(_episode(903, content="   ")), "schema_error"),
        "not an object": (b"[1, 2, 3]", "schema_error"),
        "as large as the server carries": (_json(_episode(904, content="z" * biggest)), "payload_too_large"),
        "over the size limit": (_json(_episode(905, content="w " * (max_bytes // 2))), "payload_too_large"),
    }


async def test_every_poison_class_between_good_episodes_leaves_exactly_the_good_ones_stored(pipeline):
    poison = _poison_episodes(pipeline.settings.nats.max_message_bytes, _near_server_max(pipeline))
    good = 30
    names = list(poison)
    for i in range(good):
        await pipeline.bus.js_publish(subjects.episode(GROUP), _json(_episode(i)))
        if i < len(names):
            await pipeline.bus.js_publish(subjects.episode(GROUP), poison[names[i]][0])
    assert await wait_for_episodes(pipeline, GROUP, good, timeout=30) == good
    letters = await dead_letters(pipeline, GROUP, n=len(poison), timeout=30)
    assert sorted(lt.letter.reason for lt in letters) == sorted(reason for _, reason in poison.values())
    assert await worker_settled(pipeline.bus)  # nothing more arrives: no poison was stored, no good one dead-lettered
    assert await pipeline.engine.store.count_episodes(GROUP) == good
    assert len(await list_letters(pipeline.bus, GROUP)) == len(poison)
    assert pipeline.metrics.worker_restarts._value.get() == 0


async def test_a_nul_character_is_stored_and_recalled_as_sent(pipeline):
    await pipeline.bus.js_publish(subjects.episode(GROUP), _json(_episode(0, content="before\x00after")))
    assert await wait_for_episodes(pipeline, GROUP, 1) == 1
    [episode] = await pipeline.engine.store.get_episodes(GROUP, ["good-0"])
    assert episode.content == "before\x00after"


async def test_every_poison_class_between_good_requests_gets_an_error_reply_and_the_good_ones_answers(pipeline):
    good = request("hello there").model_dump(by_alias=True, mode="json")
    poison = {
        "deeply nested": (b'{"payload": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "malformed_json"),
        "huge integer": (b'{"payload": {"content": "hi", "meta": {"agentId": "echo"}}, "n": ' + b"7" * 5_000 + b"}",
                         "malformed_json"),
        "invalid utf-8": (b'{"payload": "\xff"}', "malformed_json"),
        "lone surrogate": (_json({**good, "payload": {**good["payload"], "content": "x\udfffy"}}), "invalid_unicode"),
        "wrong type": (_json({**good, "payload": {**good["payload"], "content": ["a"]}}), "schema_error"),
        "as large as the server carries": (_json({**good, "payload": {**good["payload"],
                                                                         "content": "z" * _near_server_max(pipeline)}}),
                         "payload_too_large"),
    }
    answered = 0
    for name, (data, reason) in poison.items():
        reply = json.loads((await pipeline.bus.request(subjects.SKILL_REQUEST, data, timeout_s=10)).data)
        assert reply.get("reason") == reason, (name, reply)
        ok = json.loads((await pipeline.bus.request(subjects.SKILL_REQUEST, _json(good), timeout_s=10)).data)
        answered += ok["content"].startswith("Noted")
    assert answered == len(poison)
    letters = await dead_letters(pipeline, subjects.UNROUTED_GROUP, n=len(poison), timeout=10)
    assert sorted(lt.letter.reason for lt in letters) == sorted(r for _, r in poison.values())


async def test_an_episode_id_reused_in_another_group_is_dead_lettered_never_acked_as_stored(pipeline):
    first = _episode(0)
    reused = {**_episode(0, content="a different episode"), "groupId": "user_other"}
    await pipeline.bus.js_publish(subjects.episode(GROUP), _json(first))
    assert await wait_for_episodes(pipeline, GROUP, 1) == 1
    await pipeline.bus.js_publish(subjects.episode("user_other"), _json(reused))
    [letter] = await dead_letters(pipeline, "user_other", n=1, timeout=10)
    assert letter.letter.reason == "episode_id_conflict" and GROUP in letter.letter.error
    assert await pipeline.engine.store.count_episodes("user_other") == 0
    assert pipeline.metrics.episodes_stored.labels(created="false")._value.get() == 0


async def _counted(read, n: int, timeout: float = 15) -> float:  # type: ignore[no-untyped-def]
    with anyio.move_on_after(timeout):
        while read() < n:
            await anyio.sleep(0.02)
    return read()


async def test_a_message_on_the_workers_fetch_inbox_that_is_no_delivery_is_counted_and_the_worker_lives_on(pipeline):
    rt = pipeline
    with anyio.fail_after(10):
        while rt.worker.consumer.inbox is None:
            await anyio.sleep(0.02)
    inbox = rt.worker.consumer.inbox
    for i in range(20):  # what a stranger's reply addressed to the worker's inbox looks like: no $JS.ACK reply
        await rt.bus.publish(inbox, _json({"status": "healthy", "n": i}))
    await rt.bus.flush()
    errors = rt.metrics.worker_protocol_errors
    not_js = await _counted(errors.labels(kind="not_jetstream")._value.get, 20)
    with anyio.fail_after(15):  # a status no pull request is answered with, arriving while a fetch waits (one that
        while errors.labels(kind="status")._value.get() < 1:  # was queued before the fetch is skipped by nats-py)
            await rt.bus.publish(inbox, b"", headers={"Status": "400", "Description": "Forged"})
            await anyio.sleep(0.05)
    await rt.bus.js_publish(subjects.episode(GROUP), _json(_episode(1)))
    stored = await wait_for_episodes(rt, GROUP, 1)
    assert not_js == 20
    assert stored == 1
    assert rt.worker.restarts == 0 and rt.metrics.worker_restarts._value.get() == 0
