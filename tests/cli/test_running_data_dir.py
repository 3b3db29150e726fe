"""A command next to a running `mnemobus run` (issue 41): it joins the nats-server that process owns on the data
directory, never starts a second one there, and never removes the owner's `embedded-url`."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.blackbox.conftest import service_env, service_process
from tests.cli.test_cli import ROOT


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    home = tmp_path_factory.mktemp("running")
    env = service_env(home)
    with service_process(home, env=env):
        yield home, env


def _mnemobus(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mnemobus.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("command", [["doctor"], ["dlq", "list"], ["status"], ["memory", "show", "--user", "josh"]])
def test_a_command_joins_the_running_server_and_leaves_its_url_file(running: tuple[Path, dict[str, str]],
                                                                    command: list[str]) -> None:
    home, env = running
    url_file = home / "nats" / "embedded-url"
    before = url_file.read_text()
    proc = _mnemobus(*command, env=env)
    assert "using the running nats-server" in proc.stderr, proc.stdout + proc.stderr[-2000:]
    assert "embedded server" not in proc.stdout
    assert url_file.read_text() == before


def test_doctor_next_to_a_running_process_passes(running: tuple[Path, dict[str, str]]) -> None:
    proc = _mnemobus("doctor", env=running[1])
    assert proc.returncode == 0 and "doctor: all checks passed" in proc.stdout, proc.stdout + proc.stderr[-2000:]


def test_a_second_run_on_the_same_data_directory_refuses_and_says_how_to_join(
        running: tuple[Path, dict[str, str]]) -> None:
    home, env = running
    proc = _mnemobus("run", "--role", "worker", env=env)
    assert proc.returncode == 1
    assert f"{home / 'nats'} is in use" in proc.stderr
    assert f'MNEMOBUS_NATS__URL="$(cat {home / "nats" / "embedded-url"})"' in proc.stderr
    assert (home / "nats" / "embedded-url").exists()


@pytest.mark.anyio
async def test_mcp_over_stdio_next_to_a_running_process_uses_its_bus_worker_and_store(
        running: tuple[Path, dict[str, str]]) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from tests.blackbox.test_mcp import _search_until_found, _text

    home, env = running
    before = (home / "nats" / "embedded-url").read_text()
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemobus.cli", "mcp"], cwd=str(ROOT), env=env)
    async with Client(params) as client:
        added = await client.call_tool("add_memory", {"group_id": "next_to_run", "content": "My bike is red.",
                                                      "speaker": "Ana"})
        assert not added.is_error, _text(added)
        items = await _search_until_found(client, "next_to_run", "What colour is the bike?")
    assert any("red" in i["fact"] for i in items)
    assert (home / "nats" / "embedded-url").read_text() == before
