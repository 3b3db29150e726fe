"""The HTTP API under hostile input: every answer is a 4xx naming the problem, never a 500, and the
connection keeps serving."""

from __future__ import annotations

import pytest

from mnemobus.shared.limits import MAX_CONTENT_CHARS, MAX_HTTP_BODY_BYTES
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
    from mnemobus.shared import subjects
    from mnemobus.shared.errors import StoreUnavailable

    await api.say(group_id, "I keep a journal")
    stream_before = (await api.rt.bus.js.stream_info(subjects.EPISODE_STREAM)).state.messages

    async def disk_full(_groups):
        raise StoreUnavailable("sqlite: database or disk is full")

    monkeypatch.setattr(api.store, "delete_groups", disk_full)
    r = await api.http.post("/clear")
    assert r.status_code == 503 and "disk is full" in r.json()["detail"]
    assert (await api.rt.bus.js.stream_info(subjects.EPISODE_STREAM)).state.messages == stream_before >= 1
    monkeypatch.undo()
    assert await api.store.count_episodes(group_id) == 1


_OUT_OF_CALENDAR = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]


@pytest.mark.parametrize("when", _OUT_OF_CALENDAR)
async def test_a_message_time_outside_the_calendar_once_in_utc_is_refused_at_both_doors(api: Api, group_id: str,
                                                                                       when: str) -> None:
    body = {"group_id": group_id, "messages": [{"role_type": "user", "content": "I live in Oslo", "timestamp": when}]}
    r = await api.http.post("/messages", json=body, headers=api.auth)
    _, headers = await api.nats("messages", body)
    assert r.status_code == 422 and "outside years 1 to 9999 once in UTC" in r.text
    assert headers["Nats-Service-Error-Code"] == "422" and "messages.0.timestamp" in headers["Nats-Service-Error"]
    assert (await api.rt.bus.js.stream_info("MEMORY_EPISODES")).state.messages == 0


@pytest.mark.parametrize("when", _OUT_OF_CALENDAR)
async def test_a_search_time_outside_the_calendar_is_a_422_not_a_500(api: Api, group_id: str, when: str) -> None:
    r = await api.http.post("/search", json={"group_ids": [group_id], "query": "Oslo", "as_of": when},
                            headers=api.auth)
    assert r.status_code == 422 and "as_of" in r.text


async def test_a_message_over_the_bus_limit_in_bytes_is_refused_at_the_door_though_its_characters_fit(
        api: Api, group_id: str) -> None:
    limit = api.rt.settings.nats.max_message_bytes
    content = "\U0001F600" * (limit // 4)  # a quarter of the limit in characters, the whole of it in bytes
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "user", "content": content}]}, headers=api.auth)
    assert r.status_code == 422 and f"the limit is {limit}" in r.text and "bytes" in r.text


@pytest.mark.parametrize("group", ["_unrouted", "_warmup", "_anything"])
async def test_a_reserved_group_id_is_refused_for_writes_and_reads(api: Api, group: str) -> None:
    r = await api.http.post("/messages", json={"group_id": group, "messages": [
        {"role_type": "user", "content": "hello"}]}, headers=api.auth)
    s = await api.http.post("/search", json={"group_ids": [group], "query": "hello"}, headers=api.auth)
    assert r.status_code == 422 and "reserved" in r.text
    assert s.status_code == 422 and "reserved" in s.text


async def test_deleting_the_unrouted_group_is_refused_and_its_dead_letters_kept(api: Api) -> None:
    from mnemobus.shared import subjects

    await api.rt.bus.js_publish(subjects.dlq(subjects.UNROUTED_GROUP), b'{"reason": "malformed_json"}')
    before = (await api.rt.bus.js.stream_info(subjects.DLQ_STREAM)).state.messages
    r = await api.http.delete(f"/group/{subjects.UNROUTED_GROUP}", headers=api.auth)
    _, headers = await api.nats("delete-group", {"group_id": subjects.UNROUTED_GROUP})
    assert r.status_code == 422 and "reserved" in r.text
    assert headers["Nats-Service-Error-Code"] == "422"
    assert (await api.rt.bus.js.stream_info(subjects.DLQ_STREAM)).state.messages == before == 1


async def test_adding_an_entity_while_its_group_is_deleted_is_never_a_500(api: Api, group_id: str) -> None:
    import anyio

    statuses: list[tuple[str, int]] = []

    async def add(i: int) -> None:
        r = await api.http.post("/entity-node", json={"uuid": f"race-{i}", "group_id": group_id,
                                                      "name": f"Thing {i}", "summary": ""}, headers=api.auth)
        statuses.append(("add", r.status_code))

    async def delete() -> None:
        r = await api.http.delete(f"/group/{group_id}", headers=api.auth)
        statuses.append(("delete", r.status_code))

    for i in range(25):
        async with anyio.create_task_group() as tg:
            tg.start_soon(add, i)
            tg.start_soon(delete)
    assert sorted(set(statuses)) == [("add", 201), ("delete", 200)]
    assert len(statuses) == 50


async def test_clear_failing_part_way_leaves_every_group_as_it_was(api: Api) -> None:
    for group in ("user_a", "user_b"):
        await api.say(group, "I keep a journal")
    writer = api.store._writer_conn()  # noqa: SLF001 - a trigger on the store's own connection fails one delete
    writer.execute("CREATE TEMP TRIGGER disk_full BEFORE DELETE ON episodes WHEN old.group_id = 'user_b' "
                   "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END")
    r = await api.http.post("/clear", headers=api.auth)
    kept = [await api.store.count_episodes(g) for g in ("user_a", "user_b")]
    writer.execute("DROP TRIGGER disk_full")
    assert r.status_code == 500 and kept == [1, 1]  # the trigger's RAISE is a constraint error to SQLite


async def test_a_search_over_a_damaged_index_is_a_500_naming_the_repair_not_a_503_to_retry(
        api: Api, group_id: str) -> None:
    from tests.store_damage import scramble

    await api.say(group_id, "I live in Lisbon and I keep bees")
    scramble(api.store.path, "facts_fts", "entities_fts", "episodes_fts")
    r = await api.http.post("/search", json={"group_ids": [group_id], "query": "where do I live", "max_facts": 3},
                            headers=api.auth)
    assert r.status_code == 500 and "Retry-After" not in r.headers, r.text
    assert r.json()["detail"].startswith("store damaged") and "mnemobus doctor --repair" in r.json()["detail"]
    assert api.rt.metrics.http_errors.labels(kind="StoreCorrupt")._value.get() == 1
