"""A whole `mnemobus run` in its own process, reached only through its public doors."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def service_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a private mnemobus: embedded nats-server, store and outbox under `home`."""
    env = dict(os.environ)
    env.update({
        "MNEMOBUS_NATS__DATA_DIR": str(home / "nats"),
        "MNEMOBUS_STORE__SQLITE_PATH": str(home / "memory.sqlite3"),
        "MNEMOBUS_MEMORY__OUTBOX_PATH": str(home / "outbox.sqlite3"),
        "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash",
        "MNEMOBUS_METRICS__PORT": "0",
        **extra,
    })
    env.pop("MNEMOBUS_NATS__URL", None)
    return env


@contextlib.contextmanager
def service_process(home: Path, role: str = "all", *, env: dict[str, str] | None = None, port: int | None = None,
                    ready_path: str = "/healthcheck", ready_status: int = 200) -> Iterator[str]:
    """`mnemobus run --role <role>` on a private embedded nats-server and store; yields the base URL of the port
    it is told to serve on (the API's, unless `port` names another door configured in `env`)."""
    if port is None:
        port = free_port()
        env = {**(env or service_env(home)), "MNEMOBUS_API__PORT": str(port)}
    env = env or service_env(home)
    log_path = home / "service.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mnemobus.cli", "run", "--role", role, "--quiet"], cwd=ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"mnemobus run exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}{ready_path}", timeout=1).status_code == ready_status:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"mnemobus run not healthy within 60 s: {log_path.read_text()[-2000:]}")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def running_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with service_process(tmp_path_factory.mktemp("service")) as url:
        yield url
