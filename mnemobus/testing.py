"""pytest plugin: a real nats-server per test session, fresh names per test.

`--nats-url` uses a running server instead; tests that stop or restart the
server carry `@pytest.mark.own_server` and start one of their own.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from mnemobus.bus.server import EmbeddedNatsServer


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--nats-url", default=None, help="use this running nats-server instead of starting one")


@pytest.fixture
def anyio_backend() -> str:
    # nats-py and the neo4j driver are asyncio-only
    return "asyncio"


def _assert_alive(server: EmbeddedNatsServer) -> None:
    assert server.running(), "the nats-server this test session started has exited"
    assert server.port is not None
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as s:
        banner = s.recv(4096)
    assert banner.startswith(b"INFO "), f"port {server.port} does not speak NATS: {banner[:40]!r}"


@pytest.fixture(scope="session")
def nats_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedNatsServer | None]:
    if request.config.getoption("--nats-url"):
        yield None
        return
    server = EmbeddedNatsServer(tmp_path_factory.mktemp("nats"))
    server.start()
    _assert_alive(server)
    yield server
    server.stop()


@pytest.fixture
def nats_url(request: pytest.FixtureRequest, nats_server: EmbeddedNatsServer | None) -> str:
    url = request.config.getoption("--nats-url")
    if url:
        return str(url)
    assert nats_server is not None and nats_server.url
    _assert_alive(nats_server)
    return nats_server.url


@pytest.fixture
def own_nats_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedNatsServer]:
    """A private server a test may stop, kill or restart."""
    if request.config.getoption("--nats-url"):
        pytest.skip("own_server test skipped under --nats-url")
    server = EmbeddedNatsServer(tmp_path / "nats-own")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def unique() -> str:
    """A fresh name fragment: isolate tests by name, not by restarting servers."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def group_id(unique: str) -> str:
    return f"test-{unique}"
