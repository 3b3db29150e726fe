"""No secret is printed (issue 41): a URL's password, an MCP token, an API key never reach the terminal or a log,
whatever command printed it and however the value was wrong."""

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mnemobus.bus.permissions import nats_single_user
from mnemobus.bus.server import EmbeddedNatsServer
from tests.cli.test_cli import ROOT, _env, _mnemobus

PASSWORD = "pw-9f2c1e7d5b3a"


@pytest.fixture
def password_bus(tmp_path: Path) -> Iterator[str]:
    """A nats-server that lets in only `ops` with PASSWORD; yields the URL carrying both."""
    server = EmbeddedNatsServer(tmp_path / "nats-pw", config=nats_single_user("ops", PASSWORD))
    url = server.start()
    yield url.replace("nats://", f"nats://ops:{PASSWORD}@", 1)
    server.stop()


def test_doctor_shows_the_nats_url_with_its_password_masked(tmp_path: Path, password_bus: str) -> None:
    proc = _mnemobus("doctor", env=_env(tmp_path, MNEMOBUS_NATS__URL=password_bus))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "nats: ok (nats://ops:***@127.0.0.1:" in proc.stdout
    assert PASSWORD not in proc.stdout + proc.stderr


def test_a_too_short_mcp_token_is_refused_without_being_echoed(tmp_path: Path) -> None:
    proc = _mnemobus("doctor", env=_env(tmp_path, MNEMOBUS_MCP__CLIENTS='[{"name": "laptop", "token": "short-tok1"}]'))
    assert proc.returncode == 2
    assert "mcp.clients.0.token" in proc.stderr and "at least 16 characters" in proc.stderr
    assert "short-tok1" not in proc.stdout + proc.stderr


def test_a_url_with_a_password_and_a_wrong_scheme_is_refused_with_the_password_masked(tmp_path: Path) -> None:
    proc = _mnemobus("doctor", env=_env(tmp_path, MNEMOBUS_NATS__URL=f"http://ops:{PASSWORD}@127.0.0.1:4222"))
    assert proc.returncode == 2 and "must start with nats://" in proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr and "ops:***@" in proc.stderr


def test_a_worker_logs_no_password_and_no_api_key(tmp_path: Path, password_bus: str) -> None:
    api_key = "api-key-5d1e0c9b8a7f6e"
    log_path = tmp_path / "worker.log"
    env = _env(tmp_path, MNEMOBUS_NATS__URL=password_bus, MNEMOBUS_API__API_KEY=api_key, MNEMOBUS_LOG_LEVEL="DEBUG",
               MNEMOBUS_WORKER__HEARTBEAT_S="0.2")
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mnemobus.cli", "run", "--role", "worker"], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while "[bus] connected to" not in log_path.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-2000:]
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log_path.read_text()
    assert "[bus] connected to nats://ops:***@127.0.0.1:" in text
    assert PASSWORD not in text and api_key not in text
