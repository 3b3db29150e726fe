"""pytest plugin: one real nats-server per test session, an empty JetStream per test.

Starting a server per test cost a third of a second each, 177 times. Tests run
one at a time, so a test's only trace on a shared server is its streams (core
subscriptions end with its connections): `fresh_nats_url` deletes them all
before the test. `--nats-url` uses a running server instead (a server for
tests only: its streams are deleted before every test); tests that stop,
restart or configure the server carry `@pytest.mark.own_server` and start one
of their own.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mnemobus.bus.reset import delete_every_stream
from mnemobus.bus.server import EmbeddedNatsServer

#: what a test marked own_server is told under --nats-url
OWN_SERVER_SKIP = ("needs a nats-server of its own (it stops, restarts or configures it), "
                   "which --nats-url does not give")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--nats-url", default=None, help="use this running nats-server instead of starting one "
                     "(a server for tests only: every stream on it is deleted before each test)")


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


def empty_jetstream(url: str, timeout_s: float = 10) -> int:
    """Delete every stream on the server; how many. On a thread of its own, with its own event loop: a sync
    fixture may run while the test's loop exists."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="empty-jetstream") as pool:
        return pool.submit(asyncio.run, delete_every_stream(url, timeout_s)).result()


@pytest.fixture
def fresh_nats_url(request: pytest.FixtureRequest) -> str:
    """The nats-server of this test: the session's, with no stream left from earlier tests, or for a test marked
    own_server its private one (the same `own_nats_server` the test may stop or restart)."""
    if request.node.get_closest_marker("own_server"):
        server: EmbeddedNatsServer = request.getfixturevalue("own_nats_server")
        assert server.url
        return server.url
    url: str = request.getfixturevalue("nats_url")
    empty_jetstream(url)
    return url


@pytest.fixture
def own_nats_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EmbeddedNatsServer]:
    """A private server a test may stop, kill or restart."""
    if request.config.getoption("--nats-url"):
        pytest.skip(OWN_SERVER_SKIP)
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
