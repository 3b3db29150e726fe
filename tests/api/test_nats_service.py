"""The memory service over NATS: same bodies as HTTP, errors as nats.micro error headers, built-in stats."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from mnemobus.api.nats_service import SERVICE_NAME
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio

ERROR_CODE = "Nats-Service-Error-Code"


async def test_nats_search_answers_the_same_facts_as_http(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    query = {"group_ids": [group_id], "query": "where do I live", "max_facts": 3}
    body, _ = await api.nats("search", query)
    over_http = (await api.http.post("/search", json=query)).json()

    def unscored(b: dict) -> list:  # the score moves with the clock (an age prior from now), the answer does not
        return [{k: v for k, v in f.items() if k != "score"} for f in b["facts"]]

    assert unscored(body) == unscored(over_http) and len(body["facts"]) == 2


async def test_nats_bad_group_id_answers_error_code_422_with_the_reason(api: Api) -> None:
    body, headers = await api.nats("search", {"group_ids": ["user:42"], "query": "x"})
    assert headers[ERROR_CODE] == "422" and "group id" in headers["Nats-Service-Error"]


async def test_nats_fact_by_unknown_id_answers_404(api: Api, group_id: str) -> None:
    await api.say(group_id, "hello there")
    _, headers = await api.nats("fact", {"uuid": "nope"})
    assert headers[ERROR_CODE] == "404"


async def test_nats_episodes_by_group_newest_first(api: Api, group_id: str) -> None:
    await api.say(group_id, "one")
    await api.say(group_id, "two")
    body, _ = await api.nats("episodes", {"group_id": group_id, "last_n": 5})
    assert [e["content"] for e in body["episodes"]] == ["tester(user): two", "tester(user): one"]


async def test_nats_traverse_walks_from_the_named_entity(api: Api, group_id: str) -> None:
    await api.say(group_id, "I work at Acme. Acme depends on Postgres.")
    body, _ = await api.nats("traverse", {"group_id": group_id, "entity": "tester", "max_hops": 2})
    assert {h["fact"]["fact"] for h in body["hops"]} >= {"tester works at Acme"}


async def test_nats_history_and_as_of_show_a_superseded_fact(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    await api.say(group_id, "I moved from Berlin to London.")
    history, _ = await api.nats("history", {"group_id": group_id, "entity": "tester", "relation": "lives_in"})
    assert [f["fact"] for f in history["facts"]][-1] == "tester lives in Berlin" and len(history["facts"]) == 2
    now, _ = await api.nats("as-of", {"group_id": group_id, "as_of": datetime.now(UTC).isoformat()})
    assert [f["fact"] for f in now["facts"] if "lives" in f["fact"]] == ["tester lives in London (moved from Berlin)"]


async def test_nats_entity_by_id_after_entity_search(api: Api, group_id: str) -> None:
    await api.say(group_id, "I work at Acme.")
    found, _ = await api.nats("entities", {"group_id": group_id, "query": "Acme"})
    acme = next(e for e in found["entities"] if e["name"] == "Acme")
    body, _ = await api.nats("entity", {"group_id": group_id, "uuid": acme["uuid"]})
    assert body["name"] == "Acme"


async def test_nats_health_reports_the_store(api: Api) -> None:
    body, _ = await api.nats("health")
    assert body == {"status": "healthy", "store": "ok"}


async def test_nats_status_says_unavailable_without_the_worldstate_role(api: Api) -> None:
    body, _ = await api.nats("status")
    assert body == {"available": False, "document": None}


async def test_service_stats_count_requests_per_endpoint(api: Api) -> None:
    await api.nats("health")
    await api.nats("health")
    msg = await api.rt.bus.request(f"$SRV.STATS.{SERVICE_NAME}", b"", 2)
    stats = json.loads(msg.data)
    health = next(e for e in stats["endpoints"] if e["name"] == "health")
    assert health["num_requests"] == 2 and health["subject"] == "memory.api.health"


async def test_nats_delete_fact_deletes_it_and_a_second_time_is_404(api: Api, group_id: str) -> None:
    await api.say(group_id, "I live in Berlin.")
    [fact] = await api.store.facts_valid_at(group_id, datetime.now(UTC))
    body, headers = await api.nats("delete-fact", {"uuid": fact.id})
    assert body["facts"] == 1 and "Nats-Service-Error-Code" not in headers
    _, headers = await api.nats("delete-fact", {"uuid": fact.id})
    assert headers["Nats-Service-Error-Code"] == "404"


async def test_nats_entity_node_creates_the_entity(api: Api, group_id: str) -> None:
    body, _ = await api.nats("entity-node", {"uuid": "n1", "group_id": group_id, "name": "Falcon"})
    assert (body["uuid"], body["name"]) == ("n1", "Falcon")


async def test_service_stats_count_error_replies_and_the_time_the_work_took(api: Api) -> None:
    for _ in range(3):
        _, headers = await api.nats("fact", {"uuid": "no-such-fact"})
        assert headers["Nats-Service-Error-Code"] == "404"
    await api.nats("search", {"group_ids": ["user:bad"], "query": "x"})
    stats = json.loads((await api.rt.bus.request(f"$SRV.STATS.{SERVICE_NAME}", b"", 2)).data)
    by_name = {e["name"]: e for e in stats["endpoints"]}
    assert (by_name["fact"]["num_requests"], by_name["fact"]["num_errors"]) == (3, 3)
    assert "no-such-fact" in by_name["fact"]["last_error"]
    assert by_name["search"]["num_errors"] == 1 and "group" in by_name["search"]["last_error"]
    # the time covers the work, not only the hand-off to the task group
    histogram = api.rt.metrics.handler_seconds.labels(endpoint="api.fact")
    assert by_name["fact"]["processing_time"] >= int(histogram._sum.get() * 1e9 * 0.99)


async def test_nats_search_over_a_damaged_index_answers_500_naming_the_repair(api: Api, group_id: str) -> None:
    from tests.store_damage import scramble

    await api.say(group_id, "I live in Berlin.")
    scramble(api.store.path, "facts_fts", "entities_fts", "episodes_fts")
    _, headers = await api.nats("search", {"group_ids": [group_id], "query": "where do I live", "max_facts": 3})
    assert headers[ERROR_CODE] == "500" and "mnemobus doctor --repair" in headers["Nats-Service-Error"]
