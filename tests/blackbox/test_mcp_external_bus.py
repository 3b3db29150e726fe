"""The MCP door on a bus it does not own (issues 34 and 41): a nats-server started on its own, a worker as its own
process, and the MCP role as a third, driven by the MCP SDK's client over streamable HTTP, every tool. The MCP
process reads the store the worker writes; one that would read another store refuses to start, naming both."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio
import httpx
import nats
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mnemobus.bus.server import EmbeddedNatsServer
from tests.blackbox.conftest import ROOT, free_port, service_process
from tests.blackbox.test_mcp import ADMIN_TOKEN, READER_TOKEN, _over_http, _search_until_found, _text

pytestmark = pytest.mark.anyio


def bus_env(url: str, home: Path, **extra: str) -> dict[str, str]:
    """A process on the external bus `url`; its store and outbox under `home` unless `extra` says otherwise."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOBUS_")}
    env.update({"MNEMOBUS_NATS__URL": url, "MNEMOBUS_STORE__SQLITE_PATH": str(home / "memory.sqlite3"),
                "MNEMOBUS_MEMORY__OUTBOX_PATH": str(home / "outbox.sqlite3"),
                "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash", "MNEMOBUS_METRICS__PORT": "0",
                # a beat is fresh for three intervals: at 0.5 s, a worker whose loop a loaded CI machine held for
                # 1.5 s looked gone to the MCP role's store check, which then started instead of refusing
                "MNEMOBUS_WORKER__HEARTBEAT_S": "2", **extra})
    return env


def wait_for_worker_heartbeat(url: str) -> None:
    async def beat() -> None:
        nc = await nats.connect(url)
        try:
            with anyio.fail_after(60):
                while True:
                    with contextlib.suppress(Exception):
                        kv = await nc.jetstream().key_value("MEMORY_HEARTBEATS")
                        if any(k.startswith("worker.") for k in await kv.keys()):
                            return
                    await anyio.sleep(0.2)
        finally:
            await nc.close()

    anyio.run(beat)


@contextlib.contextmanager
def worker_process(env: dict[str, str], log_path: Path, cwd: Path = ROOT) -> Iterator[None]:
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mnemobus.cli", "run", "--role", "worker", "--quiet"],
                                cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_worker_heartbeat(env["MNEMOBUS_NATS__URL"])
            yield
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def external_bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A nats-server of its own and a worker process writing to `<home>/memory.sqlite3`."""
    home = tmp_path_factory.mktemp("external")
    server = EmbeddedNatsServer(home / "nats")
    url = server.start()
    try:
        with worker_process(bus_env(url, home), home / "worker.log"):
            yield url, home
    finally:
        server.stop()


METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def mcp_on_external_bus(external_bus: tuple[str, Path]) -> Iterator[str]:
    url, home = external_bus
    port = free_port()
    env = bus_env(url, home, MNEMOBUS_MCP__PORT=str(port), MNEMOBUS_METRICS__PORT=str(METRICS_PORT),
                  MNEMOBUS_MCP__CLIENTS=json.dumps([{"name": "reader", "token": READER_TOKEN},
                                                    {"name": "ops", "token": ADMIN_TOKEN, "admin": True}]))
    with service_process(home, "mcp", env=env, port=port, ready_path="/mcp", ready_status=401) as base:
        yield f"{base}/mcp"


def _invalid_calls(tool: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10).text
    line = f'mnemobus_mcp_calls_total{{outcome="invalid",tool="{tool}"}} '
    return sum(float(ln[len(line):]) for ln in text.splitlines() if ln.startswith(line))


async def _ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, f"{tool}: {_text(result)}"
    return dict(result.structured_content)


async def test_every_tool_works_over_http_against_a_separate_bus_and_worker(mcp_on_external_bus: str) -> None:
    group = "ext_every_tool"
    async with _over_http(mcp_on_external_bus, ADMIN_TOKEN) as client:
        added = await _ok(client, "add_memory", {"group_id": group, "speaker": "Ana",
                                                 "content": "I moved to Lisbon in March. I work at Feedzai now."})
        episode = added["episode_uuids"][0]
        found = await _search_until_found(client, group, "Where does Ana work?")
        assert any(i["kind"] == "fact" and "Feedzai" in i["fact"] for i in found)
        entities = (await _ok(client, "search_entities", {"group_id": group, "query": "Ana"}))["entities"]
        assert any(e["name"] == "Ana" for e in entities)
        hops = (await _ok(client, "entity_neighbourhood", {"group_id": group, "entity": "Ana"}))["hops"]
        assert any("Feedzai" in h["fact"]["fact"] for h in hops)
        history = (await _ok(client, "fact_history", {"group_id": group, "entity": "Ana"}))["facts"]
        assert {f["name"] for f in history} >= {"works_at", "lives_in"}
        now = datetime.now(timezone.utc).isoformat()
        assert len((await _ok(client, "graph_as_of", {"group_id": group, "as_of": now}))["facts"]) == len(history)
        listed = (await _ok(client, "get_episodes", {"group_id": group}))["episodes"]
        assert [e["uuid"] for e in listed] == [episode]
        works_at = next(f["uuid"] for f in history if f["name"] == "works_at")
        assert (await _ok(client, "delete_fact", {"uuid": works_at}))["facts"] == 1
        assert (await _ok(client, "delete_episode", {"uuid": episode}))["episodes"] == 1
        await _ok(client, "add_memory", {"group_id": "ext_cleared", "content": "I keep bees."})
        await _search_until_found(client, "ext_cleared", "bees")
        assert (await _ok(client, "clear_group", {"group_id": "ext_cleared"}))["episodes"] == 1


def test_an_mcp_role_on_another_store_than_the_workers_refuses_to_start_naming_both(
        external_bus: tuple[str, Path], tmp_path: Path) -> None:
    url, home = external_bus
    env = bus_env(url, tmp_path, MNEMOBUS_MCP__PORT=str(free_port()), MNEMOBUS_API__API_KEY=ADMIN_TOKEN)
    try:
        done = subprocess.run([sys.executable, "-m", "mnemobus.cli", "run", "--role", "mcp", "--quiet"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:  # it started instead of refusing: say why, from its own log
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"the MCP role was still running after 120 s instead of refusing; its log ends:\n{said[-3000:]}")
    assert done.returncode == 1, done.stderr[-2000:]
    line = next(ln for ln in done.stderr.splitlines() if "store" in ln and "worker" in ln)
    assert str(tmp_path / "memory.sqlite3") in line and str(home / "memory.sqlite3") in line


@pytest.fixture(scope="module")
def checkout_with_a_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A worker started in a directory with the default store path (`data/mnemobus.sqlite3`, relative)."""
    checkout = tmp_path_factory.mktemp("checkout")
    server = EmbeddedNatsServer(checkout / "nats-server")
    url = server.start()
    env = {k: v for k, v in bus_env(url, checkout).items() if k not in
           ("MNEMOBUS_STORE__SQLITE_PATH", "MNEMOBUS_MEMORY__OUTBOX_PATH")}
    try:
        with worker_process(env, checkout / "worker.log", cwd=checkout):
            yield url, checkout
    finally:
        server.stop()


async def test_the_readme_stdio_recipe_reads_the_store_the_worker_writes(
        checkout_with_a_worker: tuple[str, Path], tmp_path: Path) -> None:
    url, checkout = checkout_with_a_worker
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOBUS_")}
    env.update({"MNEMOBUS_NATS__URL": url, "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash",
                "MNEMOBUS_METRICS__PORT": "0"})
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemobus.cli", "-C", str(checkout), "mcp"],
                                   cwd=str(tmp_path), env=env)
    async with Client(params) as client:
        await _ok(client, "add_memory", {"group_id": "recipe", "content": "My cat is called Miso.", "speaker": "Ana"})
        items = await _search_until_found(client, "recipe", "What is the cat called?")
    assert any("Miso" in i["fact"] for i in items)
    assert (checkout / "data" / "mnemobus.sqlite3").exists() and not (tmp_path / "data").exists()


def test_stdio_started_elsewhere_without_the_checkout_refuses_naming_both_stores(
        checkout_with_a_worker: tuple[str, Path], tmp_path: Path) -> None:
    url, checkout = checkout_with_a_worker
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOBUS_")}
    env.update({"MNEMOBUS_NATS__URL": url, "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash",
                "MNEMOBUS_METRICS__PORT": "0"})
    done = subprocess.run([sys.executable, "-m", "mnemobus.cli", "mcp"], cwd=tmp_path, env=env, input="",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"{tmp_path.resolve()}/data/mnemobus.sqlite3" in done.stderr
    assert f"{checkout.resolve()}/data/mnemobus.sqlite3" in done.stderr


async def test_an_argument_of_the_wrong_type_is_a_422_naming_it_and_is_counted(mcp_on_external_bus: str) -> None:
    before = _invalid_calls("get_episodes")
    async with _over_http(mcp_on_external_bus, READER_TOKEN) as client:
        bad = await client.call_tool("get_episodes", {"group_id": "ext_types", "last_n": "lots"})
    assert bad.is_error and _text(bad).startswith("Error executing tool get_episodes: 422: last_n: ")
    assert _invalid_calls("get_episodes") == before + 1


async def test_an_empty_query_is_a_422_not_an_empty_answer(mcp_on_external_bus: str) -> None:
    async with _over_http(mcp_on_external_bus, READER_TOKEN) as client:
        bad = await client.call_tool("search_memory", {"query": "  ", "group_ids": ["ext_every_tool"]})
    assert bad.is_error and "422: query: Value error, is empty" in _text(bad)


async def test_an_empty_group_list_is_a_422_and_searches_no_group(mcp_on_external_bus: str) -> None:
    async with _over_http(mcp_on_external_bus, READER_TOKEN) as client:
        await _ok(client, "add_memory", {"group_id": "ext_someone_else", "content": "My PIN is 4711."})
        await _search_until_found(client, "ext_someone_else", "PIN")
        bad = await client.call_tool("search_memory", {"query": "PIN", "group_ids": []})
    assert bad.is_error and "422: group_ids: Value error, is empty" in _text(bad)
