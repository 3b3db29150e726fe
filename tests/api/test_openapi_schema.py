"""Every answer validates against the API's own /openapi.json, so the document is the contract."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


def response_schema(doc: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    content = doc["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]
    return {**content, "components": doc["components"]}


async def test_every_graphiti_endpoint_answers_as_its_openapi_schema_says(api: Api, group_id: str) -> None:
    doc = (await api.http.get("/openapi.json")).json()
    await api.say(group_id, "I live in Berlin.")
    fact = (await api.http.post("/search", json={"group_ids": [group_id], "query": "Berlin", "include_episodes": False})).json()["facts"][0]
    [episode] = await api.say(group_id, "another message")
    calls = [
        ("/healthcheck", "get", 200, api.http.get("/healthcheck")),
        ("/messages", "post", 202, api.http.post("/messages", json={"group_id": group_id, "messages": [
            {"role_type": "user", "role": None, "content": "x"}]})),
        ("/search", "post", 200, api.http.post("/search", json={"group_ids": [group_id], "query": "Berlin"})),
        ("/get-memory", "post", 200, api.http.post("/get-memory", json={"group_id": group_id, "center_node_uuid": None,
                                                                          "messages": [{"role_type": "user", "role": "",
                                                                                        "content": "Berlin"}]})),
        ("/episodes/{group_id}", "get", 200, api.http.get(f"/episodes/{group_id}", params={"last_n": 3})),
        ("/entity-edge/{uuid}", "get", 200, api.http.get(f"/entity-edge/{fact['uuid']}")),
        ("/entity-edge/{uuid}", "delete", 200, api.http.delete(f"/entity-edge/{fact['uuid']}")),
        ("/episode/{uuid}", "delete", 200, api.http.delete(f"/episode/{episode}")),
        ("/group/{group_id}", "delete", 200, api.http.delete(f"/group/{group_id}")),
        ("/clear", "post", 200, api.http.post("/clear")),
    ]
    for path, method, status, call in calls:
        r = await call
        assert r.status_code == status, (path, method, r.text)
        jsonschema.validate(r.json(), response_schema(doc, path, method, status))
