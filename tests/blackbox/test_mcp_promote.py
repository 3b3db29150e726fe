"""Promotion through the MCP door over streamable HTTP (issue 39): the same identity rules as `/memory clear`.

An admin token may promote into any user's memory; a non-admin token only into the memory of the users.yaml
user it acts as (`mcp.clients[].user`), and nowhere when it acts as no one. Promoted memories are listed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.blackbox.conftest import free_port, service_env, service_process
from tests.blackbox.test_mcp import _over_http, _text

pytestmark = pytest.mark.anyio
ADMIN_TOKEN = "admin-token-0123456789"
ANA_TOKEN = "ana-agent-token-0123456789"
READER_TOKEN = "reader-token-0123456789"
USERS = """users:
  - {id: ana, displayName: Ana, memoryEnabled: true, identities: {discord: "111"}}
  - {id: bo, displayName: Bo, memoryEnabled: true, identities: {discord: "222"}}
"""


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("mcp-promote")
    (home / "users.yaml").write_text(USERS)
    port = free_port()
    clients = [{"name": "admin-agent", "token": ADMIN_TOKEN, "admin": True},
               {"name": "ana-agent", "token": ANA_TOKEN, "user": "ana"},
               {"name": "reader", "token": READER_TOKEN}]
    env = service_env(home, MNEMOBUS_MCP__PORT=str(port), MNEMOBUS_MCP__CLIENTS=json.dumps(clients),
                      MNEMOBUS_IDENTITY__USERS_FILE=str(home / "users.yaml"))
    with service_process(home, "mcp", env=env, port=port, ready_path="/mcp", ready_status=401) as url:
        yield f"{url}/mcp"


async def promote(url: str, token: str, **args: Any) -> Any:
    async with _over_http(url, token) as client:
        return await client.call_tool("promote_memory", {"kind": "preference", **args})


async def listed(url: str, group: str) -> list[dict[str, Any]]:
    async with _over_http(url, READER_TOKEN) as client:
        result = await client.call_tool("list_promoted", {"group_id": group})
    assert not result.is_error, _text(result)
    return result.structured_content["promoted"]


async def test_a_token_acting_as_a_user_promotes_into_that_users_memory_and_it_is_listed(mcp_url: str) -> None:
    done = await promote(mcp_url, ANA_TOKEN, text="Ana takes her coffee black.")
    assert not done.is_error, _text(done)
    assert done.structured_content["group_id"] == "user_ana" and done.structured_content["author"] == "ana"
    assert [(m["text"], m["kind"], m["author"]) for m in await listed(mcp_url, "user_ana")] == [
        ("Ana takes her coffee black.", "preference", "ana")]


async def test_a_token_acting_as_a_user_may_not_promote_into_another_users_memory(mcp_url: str) -> None:
    refused = await promote(mcp_url, ANA_TOKEN, text="Bo hates tea.", user_id="bo")
    assert refused.is_error and "403" in _text(refused) and "'bo'" in _text(refused)
    assert await listed(mcp_url, "user_bo") == []


async def test_a_token_acting_as_no_user_and_not_admin_may_promote_nowhere(mcp_url: str) -> None:
    refused = await promote(mcp_url, READER_TOKEN, text="Bo hates tea.", user_id="bo")
    assert refused.is_error and "403" in _text(refused) and "reader" in _text(refused)


async def test_an_admin_token_promotes_into_any_users_workspace_as_itself(mcp_url: str) -> None:
    done = await promote(mcp_url, ADMIN_TOKEN, text="Deploy on Fridays only after the checklist.",
                         kind="procedure", scope="workspace", user_id="bo", agent_id="ops")
    assert not done.is_error, _text(done)
    memory = done.structured_content
    assert (memory["group_id"], memory["author"], memory["scope"]) == ("agent_ops__user_bo", "mcp:admin-agent",
                                                                      "workspace")
    assert [m["uuid"] for m in await listed(mcp_url, "agent_ops__user_bo")] == [memory["uuid"]]


async def test_an_admin_token_must_name_the_user_it_promotes_for(mcp_url: str) -> None:
    refused = await promote(mcp_url, ADMIN_TOKEN, text="Something.")
    assert refused.is_error and "user_id" in _text(refused)
