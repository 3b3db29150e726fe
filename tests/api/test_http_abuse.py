"""The HTTP API under hostile input: every answer is a 4xx naming the problem, never a 500, and the
connection keeps serving."""

from __future__ import annotations

import pytest

from mnemobus.limits import MAX_CONTENT_CHARS, MAX_HTTP_BODY_BYTES
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def _healthy(api: Api) -> None:
    r = await api.http.get("/healthcheck")
    assert r.status_code == 200, r.text


async def test_group_id_with_a_trailing_newline_is_refused_on_post_messages(api: Api) -> None:
    r = await api.http.post("/messages", json={"group_id": "user_josh\n", "messages": [
        {"role_type": "user", "content": "hello"}]})
    assert r.status_code == 422 and "group id" in r.text
    await _healthy(api)


async def test_group_id_with_a_trailing_newline_is_refused_on_delete_group(api: Api) -> None:
    r = await api.http.delete("/group/user_josh%0A")
    assert r.status_code == 422 and "group id" in r.text
    await _healthy(api)


async def test_lone_surrogate_in_a_body_is_a_422_not_a_500(api: Api) -> None:
    body = b'{"group_id": "g1", "messages": [{"role_type": "user", "content": "\\ud800"}]}'
    r = await api.http.post("/messages", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    await _healthy(api)


async def test_lone_surrogate_in_a_wrongly_typed_field_is_a_422_not_a_500(api: Api) -> None:
    body = b'{"group_id": "g1", "messages": [{"role_type": "\\ud800", "content": "hi"}]}'
    r = await api.http.post("/messages", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    await _healthy(api)


async def test_content_over_the_stored_limit_is_refused_at_the_door(api: Api, group_id: str) -> None:
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "user", "content": "x" * (MAX_CONTENT_CHARS + 1)}]})
    assert r.status_code == 422 and str(MAX_CONTENT_CHARS) in r.text


async def test_whitespace_only_content_is_refused_at_the_door(api: Api, group_id: str) -> None:
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "user", "content": " \n\t "}]})
    assert r.status_code == 422 and "whitespace" in r.text


async def test_content_at_the_limit_is_accepted_and_stored(api: Api, group_id: str) -> None:
    await api.say(group_id, "y " * (MAX_CONTENT_CHARS // 2))
    assert await api.store.count_episodes(group_id) == 1


async def test_body_over_the_limit_is_refused_with_413_before_it_is_read(api: Api) -> None:
    r = await api.http.post("/messages", content=b"{" + b" " * MAX_HTTP_BODY_BYTES + b"}",
                            headers={"content-type": "application/json"})
    assert r.status_code == 413 and "Too Large" in r.text
    await _healthy(api)


async def test_chunked_body_over_the_limit_is_refused_with_413(api: Api) -> None:
    async def chunks():  # no Content-Length: the limit is counted as the body arrives
        for _ in range(MAX_HTTP_BODY_BYTES // 65536 + 2):
            yield b" " * 65536

    r = await api.http.post("/messages", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    await _healthy(api)


async def test_an_unexpected_error_is_a_json_500_and_the_connection_keeps_serving(api: Api, monkeypatch) -> None:
    async def broken(*_a, **_k):
        raise RuntimeError("boom")

    monkeypatch.setattr(api.service, "episodes", broken)
    r = await api.http.get("/episodes/g1", params={"last_n": 1})
    assert r.status_code == 500 and r.json()["detail"].startswith("internal error")
    assert api.rt.metrics.http_errors.labels(kind="RuntimeError")._value.get() == 1
    for _ in range(3):  # the same keep-alive connection
        await _healthy(api)


async def test_clear_on_a_failing_store_answers_503_and_keeps_what_is_still_queued(api: Api, group_id: str,
                                                                                 monkeypatch) -> None:
    from mnemobus import subjects
    from mnemobus.errors import StoreUnavailable

    await api.say(group_id, "I keep a journal")
    stream_before = (await api.rt.bus.js.stream_info(subjects.EPISODE_STREAM)).state.messages

    async def disk_full(_group):
        raise StoreUnavailable("sqlite: database or disk is full")

    monkeypatch.setattr(api.store, "delete_group", disk_full)
    r = await api.http.post("/clear")
    assert r.status_code == 503 and "disk is full" in r.json()["detail"]
    assert (await api.rt.bus.js.stream_info(subjects.EPISODE_STREAM)).state.messages == stream_before >= 1
    monkeypatch.undo()
    assert await api.store.count_episodes(group_id) == 1
