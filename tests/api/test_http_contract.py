"""The Graphiti REST contract, endpoint by endpoint: status codes, field names, types."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.api.conftest import Api, wait_for
from tests.bus_counts import settle_behind_a_sentinel

pytestmark = pytest.mark.anyio

FACT_FIELDS = {"uuid": str, "name": str, "fact": str, "valid_at": (str, type(None)), "invalid_at": (str, type(None)),
               "created_at": str, "expired_at": (str, type(None)), "source_node_uuid": str,
               "target_node_uuid": str, "episodes": list}
EPISODE_FIELDS = {"uuid": str, "name": str, "group_id": str, "labels": list, "created_at": str, "source": str,
                  "source_description": str, "content": str, "valid_at": str, "entity_edges": list}


def assert_shape(obj: dict, fields: dict) -> None:
    for name, kind in fields.items():
        assert name in obj, f"missing field {name!r} in {sorted(obj)}"
        assert isinstance(obj[name], kind), f"{name}: {obj[name]!r} is not {kind}"
    for name in ("created_at", "valid_at"):
        if isinstance(obj.get(name), str):
            datetime.fromisoformat(obj[name])


async def test_healthcheck_answers_graphiti_s_exact_body(api: Api) -> None:
    r = await api.http.get("/healthcheck")
    assert (r.status_code, r.json()) == (200, {"status": "healthy"})


async def test_healthcheck_names_the_store_problem_in_its_503(api: Api, monkeypatch) -> None:
    async def down() -> None:
        raise ConnectionError("store is down")

    monkeypatch.setattr(api.store, "ping", down)
    r = await api.http.get("/healthcheck")
    assert r.status_code == 503 and r.json()["status"] == "unhealthy" and "store is down" in r.json()["store"]


async def test_messages_answers_202_with_graphiti_result_fields(api: Api, group_id: str) -> None:
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "user", "role": "", "content": "smoke test"}]})
    assert r.status_code == 202
    assert r.json()["success"] is True and isinstance(r.json()["message"], str)


async def test_messages_refuses_a_bad_group_id_with_422_and_the_reason(api: Api) -> None:
    r = await api.http.post("/messages", json={"group_id": "user:42", "messages": [
        {"role_type": "user", "role": "", "content": "hello"}]})
    assert r.status_code == 422 and "':'" in str(r.json()["detail"])


async def test_messages_refuses_a_malformed_uuid_with_422(api: Api, group_id: str) -> None:
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "user", "role": "", "content": "hello", "uuid": "has spaces/and slashes"}]})
    assert r.status_code == 422 and "uuid" in r.text


async def test_messages_with_the_same_client_uuid_are_stored_once(api: Api, group_id: str) -> None:
    body = {"group_id": group_id, "messages": [
        {"role_type": "user", "role": "", "content": "I live in Berlin.", "uuid": str(uuid.uuid4())}]}
    first, second = await api.http.post("/messages", json=body), await api.http.post("/messages", json=body)
    assert first.status_code == second.status_code == 202
    assert first.json()["episode_uuids"] == second.json()["episode_uuids"]
    await wait_for(lambda: api.store.count_episodes(group_id), 1)
    await settle_behind_a_sentinel(api.rt.bus, api.store)  # a second copy, were there one, is settled by now
    assert await api.store.count_episodes(group_id) == 1


async def test_seed_003_smoke_flow_writes_reads_back_and_deletes_a_temporary_group(api: Api, unique: str) -> None:
    group = f"copilot-chat-smoke-{unique}"
    r = await api.http.post("/messages", json={"group_id": group, "messages": [
        {"role_type": "user", "role": "", "content": "smoke test"}]})
    assert r.status_code == 202
    await wait_for(lambda: api.store.count_episodes(group), 1)
    episodes = (await api.http.get(f"/episodes/{group}", params={"last_n": 5})).json()
    assert [e["content"] for e in episodes] == ["(user): smoke test"]
    assert (await api.http.delete(f"/group/{group}")).status_code == 200
    assert (await api.http.get(f"/episodes/{group}", params={"last_n": 5})).json() == []


async def test_episodes_lists_the_last_n_oldest_first_with_episodic_node_fields(api: Api, group_id: str) -> None:
    for text in ("first message", "second message", "third message"):
        await api.say(group_id, text)
    r = await api.http.get(f"/episodes/{group_id}", params={"last_n": 2})
    assert r.status_code == 200 and [e["content"] for e in r.json()] == [
        "tester(user): second message", "tester(user): third message"]
    assert_shape(r.json()[0], EPISODE_FIELDS)


async def test_an_episode_reads_back_with_the_body_and_name_graphiti_gives_it(api: Api, group_id: str) -> None:
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "assistant", "role": "Ada", "name": "turn-7", "content": "Your flight leaves at 9."},
        {"role_type": "user", "role": None, "content": "Thanks!"}]})
    assert r.status_code == 202
    await wait_for(lambda: api.store.count_episodes(group_id), 2)
    episodes = (await api.http.get(f"/episodes/{group_id}", params={"last_n": 5})).json()
    assert {(e["name"], e["content"]) for e in episodes} == {
        ("turn-7", "Ada(assistant): Your flight leaves at 9."), ("", "(user): Thanks!")}


async def test_episodes_without_last_n_is_422_as_in_graphiti(api: Api, group_id: str) -> None:
    assert (await api.http.get(f"/episodes/{group_id}")).status_code == 422


async def test_search_returns_facts_with_graphiti_field_names_and_types(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    r = await api.http.post("/search", json={"group_ids": [group_id], "query": "where do I live", "max_facts": 3,
                                             "include_episodes": False})
    assert r.status_code == 200
    facts = r.json()["facts"]
    assert [f["fact"] for f in facts] == ["tester lives in Berlin"]
    assert_shape(facts[0], FACT_FIELDS)


async def test_search_without_group_ids_searches_every_group(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Lisbon.")
    r = await api.http.post("/search", json={"query": "Lisbon", "max_facts": 5})
    assert r.status_code == 200 and "tester lives in Lisbon" in [f["fact"] for f in r.json()["facts"]]


async def test_search_with_an_empty_group_list_is_422_not_every_group(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Lisbon.")
    r = await api.http.post("/search", json={"group_ids": [], "query": "Lisbon"})
    assert r.status_code == 422 and "name at least one group" in str(r.json()["detail"])


async def test_search_with_an_empty_query_is_422(api: Api, group_id: str) -> None:
    r = await api.http.post("/search", json={"group_ids": [group_id], "query": " "})
    assert r.status_code == 422 and "say what to recall" in str(r.json()["detail"])


async def test_search_with_a_bad_group_id_is_422_not_500(api: Api) -> None:
    r = await api.http.post("/search", json={"group_ids": ["user:42"], "query": "x"})
    assert r.status_code == 422 and "group id" in str(r.json()["detail"])


async def test_get_memory_answers_facts_for_the_messages(api: Api, group_id: str) -> None:
    await api.say(group_id, "I work at Acme.")
    r = await api.http.post("/get-memory", json={"group_id": group_id, "max_facts": 5, "center_node_uuid": None,
                                                 "messages": [{"role_type": "user", "role": "u",
                                                               "content": "where do I work?"}]})
    assert r.status_code == 200
    assert sorted((f["kind"], f["fact"]) for f in r.json()["facts"]) == [
        ("episode", "I work at Acme."), ("fact", "tester works at Acme")]


async def test_search_ranks_facts_and_the_messages_they_came_from_in_one_order(api: Api, group_id: str) -> None:
    [said] = await api.say(group_id, "My daughter Mia plays the cello in the school orchestra.")
    r = await api.http.post("/search", json={"group_ids": [group_id], "query": "who plays the cello?"})
    items = r.json()["facts"]
    assert [f["score"] for f in items] == sorted((f["score"] for f in items), reverse=True)
    messages = [f for f in items if f["kind"] == "episode"]
    assert [m["uuid"] for m in messages] == [said] and messages[0]["episodes"] == [said]
    assert any(f["kind"] == "fact" and f["episodes"] == [said] for f in items)
    assert_shape(messages[0], FACT_FIELDS)  # an unmodified Graphiti client reads a message as a fact


async def test_search_brings_the_reply_said_right_after_a_matching_message(api: Api, group_id: str) -> None:
    start = datetime(2026, 3, 1, 18, 0, tzinfo=UTC)
    turns = ["Which instrument should Mia learn next?", "The cello, she loved the school concert.",
             "Unrelated: the boiler needs a new valve."]
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "user" if i % 2 == 0 else "assistant", "role": "tester", "content": text,
         "timestamp": (start + timedelta(seconds=i)).isoformat()} for i, text in enumerate(turns)]}, headers=api.auth)
    question, reply, _ = r.json()["episode_uuids"]
    await wait_for(lambda: api.store.count_episodes(group_id), 3)
    found = (await api.http.post("/search", json={"group_ids": [group_id], "query": "which instrument for Mia?",
                                                  "max_facts": 10}, headers=api.auth)).json()["facts"]
    messages = [f["uuid"] for f in found if f["kind"] == "episode"]
    assert messages[:2] == [question, reply]  # the reply shares no word with the query: it came as the context


async def test_search_without_episodes_answers_facts_alone(api: Api, group_id: str) -> None:
    await api.say(group_id, "I work at Acme.")
    r = await api.http.post("/search", json={"group_ids": [group_id], "query": "Acme", "include_episodes": False})
    assert {f["kind"] for f in r.json()["facts"]} == {"fact"}


async def test_entity_edge_returns_the_fact_by_uuid(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    fact = (await api.http.post("/search", json={"group_ids": [group_id], "query": "Berlin", "include_episodes": False})).json()["facts"][0]
    r = await api.http.get(f"/entity-edge/{fact['uuid']}")
    assert r.status_code == 200 and r.json()["fact"] == "tester lives in Berlin"
    assert_shape(r.json(), FACT_FIELDS)


async def test_a_message_returned_by_search_ends_when_the_facts_drawn_from_it_have_ended(api: Api,
                                                                                         group_id: str) -> None:
    [earlier] = await api.say(group_id, "I live in Leeds.")
    [later] = await api.say(group_id, "I moved to York, so York is where I live now.")
    found = (await api.http.post("/search", json={"group_ids": [group_id], "query": "where do I live Leeds York",
                                                  "max_facts": 10})).json()["facts"]
    turns = {f["uuid"]: f for f in found if f["kind"] == "episode"}
    assert turns[earlier]["invalid_at"] is not None and turns[earlier]["valid_at"] is not None
    assert turns[later]["invalid_at"] is None


async def test_every_uuid_a_search_returns_can_be_fetched_as_an_entity_edge(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Leeds.", "My sister Ruth plays the oboe.")
    found = (await api.http.post("/search", json={"group_ids": [group_id], "query": "Leeds Ruth oboe",
                                                  "max_facts": 10})).json()["facts"]
    assert {f["kind"] for f in found} == {"fact", "episode"}
    for f in found:
        r = await api.http.get(f"/entity-edge/{f['uuid']}")
        assert r.status_code == 200 and r.json()["fact"] == f["fact"]
        assert_shape(r.json(), FACT_FIELDS)


async def test_entity_edge_for_an_unknown_uuid_is_404_never_500(api: Api) -> None:
    r = await api.http.get("/entity-edge/not_a_real_uuid")
    assert r.status_code == 404 and "not_a_real_uuid" in r.json()["detail"]


async def test_deleted_entity_edge_no_longer_comes_back_from_search(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    fact = (await api.http.post("/search", json={"group_ids": [group_id], "query": "Berlin", "include_episodes": False})).json()["facts"][0]
    assert (await api.http.delete(f"/entity-edge/{fact['uuid']}")).status_code == 200
    again = await api.http.post("/search", json={"group_ids": [group_id], "query": "Berlin"})
    assert [f["kind"] for f in again.json()["facts"]] == ["episode"]  # what was said stays; the fact is gone


async def test_a_deleted_entity_edge_is_gone_and_a_second_delete_is_404(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    fact = (await api.http.post("/search", json={"group_ids": [group_id], "query": "Berlin", "include_episodes": False})).json()["facts"][0]
    r = await api.http.delete(f"/entity-edge/{fact['uuid']}")
    assert (r.status_code, r.json()["facts"]) == (200, 1)
    assert (await api.http.get(f"/entity-edge/{fact['uuid']}")).status_code == 404
    assert (await api.http.delete(f"/entity-edge/{fact['uuid']}")).status_code == 404


async def test_entity_node_is_created_with_201_and_found_by_name(api: Api, group_id: str) -> None:
    r = await api.http.post("/entity-node", json={"uuid": "node-1", "group_id": group_id, "name": "Project Falcon",
                                                  "summary": "the Q3 launch"})
    assert r.status_code == 201 and (r.json()["uuid"], r.json()["name"]) == ("node-1", "Project Falcon")
    found = await api.rt.engine.search_entities(group_id, "Falcon")
    assert [e.entity.id for e in found] == ["node-1"]


async def test_entity_node_answers_in_graphiti_s_entity_node_shape_with_attributes(api: Api, group_id: str) -> None:
    r = await api.http.post("/entity-node", json={"group_id": group_id, "uuid": str(uuid.uuid4()), "name": "Acme",
                                                  "summary": "a company"})
    assert r.status_code == 201
    assert_shape(r.json(), {"uuid": str, "name": str, "group_id": str, "labels": list, "summary": str,
                            "created_at": str, "attributes": dict})


async def test_entity_node_posted_twice_is_one_entity(api: Api, group_id: str) -> None:
    body = {"uuid": "node-1", "group_id": group_id, "name": "Project Falcon"}
    assert [(await api.http.post("/entity-node", json=body)).status_code for _ in range(2)] == [201, 201]
    assert len(await api.rt.engine.search_entities(group_id, "Falcon")) == 1


async def test_entity_node_with_a_known_name_under_another_uuid_is_409_naming_it(api: Api, group_id: str) -> None:
    await api.http.post("/entity-node", json={"uuid": "node-1", "group_id": group_id, "name": "Project Falcon"})
    r = await api.http.post("/entity-node", json={"uuid": "node-2", "group_id": group_id, "name": "project falcon"})
    assert r.status_code == 409 and r.json()["uuid"] == "node-1"


async def test_delete_entity_edge_for_an_unknown_uuid_is_404(api: Api) -> None:
    assert (await api.http.delete("/entity-edge/not_a_real_uuid")).status_code == 404


async def test_delete_group_answers_result_with_counts(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    r = await api.http.delete(f"/group/{group_id}")
    assert r.status_code == 200 and r.json()["success"] is True
    assert (r.json()["episodes"], r.json()["facts"]) == (1, 1)


async def test_delete_group_with_a_bad_group_id_is_422(api: Api) -> None:
    assert (await api.http.delete("/group/bad.group")).status_code == 422


async def test_delete_episode_removes_it_from_the_group(api: Api, group_id: str) -> None:
    [kept, gone] = await api.say(group_id, "keep me", "delete me")
    r = await api.http.delete(f"/episode/{gone}")
    assert r.status_code == 200 and r.json()["success"] is True
    listed = (await api.http.get(f"/episodes/{group_id}", params={"last_n": 10})).json()
    assert [e["uuid"] for e in listed] == [kept]


async def test_delete_episode_for_an_unknown_uuid_is_404(api: Api) -> None:
    assert (await api.http.delete("/episode/not_a_real_uuid")).status_code == 404


async def test_clear_empties_the_whole_store(api: Api, group_id: str, unique: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    await api.say(f"other-{unique}", "I work at Acme.")
    r = await api.http.post("/clear")
    assert r.status_code == 200 and r.json()["success"] is True
    assert (await api.store.count_episodes(), await api.store.count_facts()) == (0, 0)


async def test_openapi_document_lists_every_graphiti_path(api: Api) -> None:
    r = await api.http.get("/openapi.json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    expected = {("/healthcheck", "get"), ("/messages", "post"), ("/search", "post"), ("/get-memory", "post"),
                ("/episodes/{group_id}", "get"), ("/entity-edge/{uuid}", "get"), ("/entity-edge/{uuid}", "delete"),
                ("/group/{group_id}", "delete"), ("/episode/{uuid}", "delete"), ("/clear", "post"),
                ("/entity-node", "post")}
    assert {(p, m) for p, ops in paths.items() for m in ops} >= expected


async def test_messages_from_two_speakers_in_one_group_keep_their_own_facts(api: Api, group_id: str) -> None:
    r = await api.http.post("/messages", json={"group_id": group_id, "messages": [
        {"role_type": "user", "role": "Anna", "content": "I live in Oslo."},
        {"role_type": "user", "role": "Ben", "content": "I live in Rome."},
        {"role_type": "assistant", "role": "helper", "content": "I live in the cloud."}]})
    assert r.status_code == 202
    await wait_for(lambda: api.store.count_episodes(group_id), 3)
    r = await api.http.post("/search", json={"group_ids": [group_id], "query": "who lives where", "max_facts": 5,
                                             "include_episodes": False})
    assert sorted(f["fact"] for f in r.json()["facts"]) == ["Anna lives in Oslo", "Ben lives in Rome"]
