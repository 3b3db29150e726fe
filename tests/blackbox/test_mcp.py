"""The MCP door, driven by the MCP SDK's own client against a real `mnemobus run --role mcp` (streamable HTTP)
and a real `mnemobus mcp` (stdio), each on its own embedded nats-server and store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.blackbox.conftest import ROOT, free_port, service_env, service_process

pytestmark = pytest.mark.anyio
ADMIN_TOKEN = "admin-token-0123456789"
READER_TOKEN = "reader-token-0123456789"
SHARED_KEY = "shared-api-key-0123456789"  # api.api_key: lets a client in, proves no one


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("mcp")
    port = free_port()
    env = service_env(home, MNEMOBUS_MCP__PORT=str(port), MNEMOBUS_API__API_KEY=SHARED_KEY,
                      MNEMOBUS_MCP__CLIENTS=json.dumps([{"name": "reader", "token": READER_TOKEN},
                                                        {"name": "ops", "token": ADMIN_TOKEN, "admin": True}]))
    with service_process(home, "mcp", env=env, port=port, ready_path="/mcp", ready_status=401) as url:
        yield f"{url}/mcp"


def _over_http(url: str, token: str) -> Client:
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=30)))


def _text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def _search_until_found(client: Client, group: str, query: str) -> list[dict[str, Any]]:
    with anyio.fail_after(30):
        while True:
            result = await client.call_tool("search_memory", {"query": query, "group_ids": [group]})
            assert not result.is_error, _text(result)
            if items := result.structured_content["facts"]:
                return items
            await anyio.sleep(0.2)


async def test_every_tool_is_listed_with_a_description_for_the_model(mcp_url: str) -> None:
    async with _over_http(mcp_url, READER_TOKEN) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"add_memory", "search_memory", "search_entities", "entity_neighbourhood", "fact_history",
                          "graph_as_of", "get_episodes", "delete_episode", "delete_fact", "clear_group",
                          "promote_memory", "list_promoted"}
    assert all(len(t.description or "") > 40 for t in tools.values())


async def test_a_memory_added_over_http_is_stored_by_the_worker_and_found_with_its_provenance(mcp_url: str) -> None:
    async with _over_http(mcp_url, READER_TOKEN) as client:
        added = await client.call_tool("add_memory", {
            "group_id": "mcp_http", "content": "I moved to Lisbon in March.", "speaker": "Ana", "uuid": "m-1"})
        assert not added.is_error, _text(added)
        episode = added.structured_content["episode_uuids"][0]
        items = await _search_until_found(client, "mcp_http", "When did Ana move to Lisbon?")
    message = next(i for i in items if i["kind"] == "episode")
    assert message["uuid"] == episode and "Lisbon" in message["fact"] and message["valid_at"]
    assert any(i["kind"] == "fact" and "Lisbon" in i["fact"] and episode in i["episodes"] for i in items)


def test_a_request_without_a_token_or_with_an_unknown_one_is_refused_with_401(mcp_url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    assert httpx.post(mcp_url, json=body, headers=headers, timeout=10).status_code == 401
    wrong = {**headers, "Authorization": "Bearer not-a-configured-token"}
    assert httpx.post(mcp_url, json=body, headers=wrong, timeout=10).status_code == 401


async def test_a_bad_group_id_is_a_tool_error_naming_it_and_the_server_keeps_serving(mcp_url: str) -> None:
    async with _over_http(mcp_url, READER_TOKEN) as client:
        bad = await client.call_tool("add_memory", {"group_id": "no spaces!", "content": "hello"})
        assert bad.is_error and "422" in _text(bad) and "group" in _text(bad)
        good = await client.call_tool("get_episodes", {"group_id": "mcp_still_alive"})
        assert not good.is_error and good.structured_content == {"episodes": []}


async def test_clearing_a_group_is_refused_to_a_client_that_is_not_admin(mcp_url: str) -> None:
    async with _over_http(mcp_url, READER_TOKEN) as client:
        refused = await client.call_tool("clear_group", {"group_id": "mcp_http"})
    assert refused.is_error and "403" in _text(refused)


async def test_the_shared_api_key_lets_a_client_in_but_may_not_clear_a_group(mcp_url: str) -> None:
    async with _over_http(mcp_url, SHARED_KEY) as client:
        listed = await client.call_tool("get_episodes", {"group_id": "mcp_shared_key"})
        refused = await client.call_tool("clear_group", {"group_id": "mcp_shared_key"})
    assert not listed.is_error
    assert refused.is_error and "403" in _text(refused) and "api-key" in _text(refused)


async def test_an_admin_clears_a_group_and_its_memory_is_gone(mcp_url: str) -> None:
    async with _over_http(mcp_url, ADMIN_TOKEN) as client:
        await client.call_tool("add_memory", {"group_id": "mcp_clear", "content": "I keep bees."})
        await _search_until_found(client, "mcp_clear", "bees")
        cleared = await client.call_tool("clear_group", {"group_id": "mcp_clear"})
        assert not cleared.is_error and cleared.structured_content["episodes"] == 1
        after = await client.call_tool("search_memory", {"query": "bees", "group_ids": ["mcp_clear"]})
    assert after.structured_content["facts"] == []


def test_the_http_role_refuses_to_start_without_any_token(tmp_path: Path) -> None:
    env = service_env(tmp_path, MNEMOBUS_MCP__PORT=str(free_port()))
    env.pop("MNEMOBUS_API__API_KEY", None)
    done = subprocess.run([sys.executable, "-m", "mnemobus.cli", "run", "--role", "mcp", "--quiet"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "mcp: streamable HTTP needs a token" in done.stderr


@pytest.fixture
async def stdio_client(tmp_path: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemobus.cli", "mcp"], cwd=str(ROOT),
                                   env=service_env(tmp_path))
    async with Client(params) as client:
        yield client


async def test_over_stdio_a_memory_is_stored_and_found_and_listed(stdio_client: Client) -> None:
    added = await stdio_client.call_tool("add_memory", {"group_id": "mcp_stdio", "content": "My dog is called Max.",
                                                        "speaker": "Ana"})
    assert not added.is_error, _text(added)
    items = await _search_until_found(stdio_client, "mcp_stdio", "What is the dog called?")
    assert any("Max" in i["fact"] for i in items)
    listed = await stdio_client.call_tool("get_episodes", {"group_id": "mcp_stdio"})
    assert [e["uuid"] for e in listed.structured_content["episodes"]] == added.structured_content["episode_uuids"]


def test_stopping_the_http_role_drains_without_a_traceback(tmp_path: Path) -> None:
    port = free_port()
    env = service_env(tmp_path, MNEMOBUS_MCP__PORT=str(port), MNEMOBUS_API__API_KEY=ADMIN_TOKEN)
    with service_process(tmp_path, "mcp", env=env, port=port, ready_path="/mcp", ready_status=401):
        pass  # up, then SIGTERM
    log = (tmp_path / "service.log").read_text()
    assert "session manager shutting down" in log
    assert "Traceback" not in log and "CancelledError" not in log


async def test_over_stdio_the_handshake_does_not_wait_for_a_first_embedding_table_build(tmp_path: Path) -> None:
    """In a fresh directory the static embedder's table is built beside the handshake, with progress in the log."""
    from mcp.client.stdio import stdio_client

    cache = tmp_path / "embeddings"
    env = service_env(tmp_path, MNEMOBUS_MEMORY__EMBEDDING__PROVIDER="static",
                      MNEMOBUS_MEMORY__EMBEDDING__CACHE_DIR=str(cache))
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemobus.cli", "mcp"], cwd=str(ROOT), env=env)
    log_path = tmp_path / "stderr.log"
    with log_path.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = (await client.list_tools()).tools
            assert len(tools) == 12
            assert not list(cache.glob("*.npy")), "the table was built before the handshake was answered"
            with anyio.fail_after(120):
                while "static embedding table: " not in log_path.read_text():
                    await anyio.sleep(0.2)
    assert "building the static embedding table" in log_path.read_text()
