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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def service_process(home: Path, role: str = "all") -> Iterator[str]:
    """`mnemobus run --role <role>` on a private embedded nats-server and store; yields the HTTP base URL."""
    port = _free_port()
    env = dict(os.environ)
    env.update({
        "MNEMOBUS_NATS__DATA_DIR": str(home / "nats"),
        "MNEMOBUS_STORE__SQLITE_PATH": str(home / "memory.sqlite3"),
        "MNEMOBUS_MEMORY__OUTBOX_PATH": str(home / "outbox.sqlite3"),
        "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash",
        "MNEMOBUS_API__PORT": str(port),
        "MNEMOBUS_METRICS__PORT": "0",
    })
    env.pop("MNEMOBUS_NATS__URL", None)
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
                    if httpx.get(f"{url}/healthcheck", timeout=1).status_code == 200:
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
