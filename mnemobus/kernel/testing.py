"""pytest plugin: one real nats-server per test session, an empty JetStream per test; the run's workers.

Starting a server per test cost a third of a second each, 177 times. Tests run
one at a time, so a test's only trace on a shared server is its streams (core
subscriptions end with its connections): `fresh_nats_url` deletes them all
before the test. `--nats-url` uses a running server instead (a server for
tests only: its streams are deleted before every test); tests that stop,
restart or configure the server carry `@pytest.mark.own_server` and start one
of their own.

Under pytest-xdist (`make test` runs `-n 4`, `--dist loadfile` from
pyproject.toml) every worker is a session of its own (its own nats-server, one
test at a time), so the above holds per worker, and a test file is one unit of
work (its tests run in order on one worker, its module fixtures start once).
What the workers share is the run's folder (`run_dir`): the one Neo4j
(kernel/neo4j_shared.py), the static embedding table, and locks: `run_lock`
for a resource of fixed name, and the mark `exclusive` for a test no other
test may run beside (it reads or changes state all tests share, such as the
Neo4j erasure journal). docs/testing.md says how a new test stays safe beside
the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import time
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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "exclusive: no other test of the run runs beside this one (it reads or "
                            "changes state every test shares, e.g. the Neo4j erasure journal)")
    workers = getattr(config.option, "numprocesses", None)
    if config.getoption("--nats-url") and workers:
        # every test deletes every stream of the server it is given: two workers on one server would delete
        # each other's streams part-way through a test
        raise pytest.UsageError("--nats-url runs the tests one at a time on that server: add -n 0 "
                                "(`make test TEST_WORKERS=0 PYTEST_ARGS=--nats-url=...`)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: files with a test marked `slow` first, so the longest (minutes) do not start last; then
    the others by number of tests; then the files with some `exclusive` tests; last the files whose tests are all
    `exclusive` (the chaos tests). The other workers wait while an exclusive test runs, and near the end they have
    little left to do anyway: the killed-worker fault test, in a `slow` file handed out first, held the three other
    workers at the gate for 253 s at the start of a run. A file's tests keep their order. Every worker sorts alike,
    so their collections agree; `--no-loadscope-reorder` keeps this order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def rank(f: str) -> int:
        alone = [i.get_closest_marker("exclusive") is not None for i in files[f]]
        if all(alone):
            return 3
        if any(alone):
            return 2
        return 0 if any(i.get_closest_marker("slow") for i in files[f]) else 1

    order = sorted(files, key=lambda f: (rank(f), -len(files[f])))  # stable: ties keep collection order
    items[:] = [item for f in order for item in files[f]]


def inner_pytest_env() -> dict[str, str]:
    """The environment of a pytest run that a test starts (a small suite of its own): not a worker of ours, and
    none of the installed pytest plugins loaded unless it names them (`-p xdist.plugin`): loading them all cost
    2.5 s of CPU per pytest process, and a run with workers is several processes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder every worker of this run shares (the session's own folder when pytest runs alone)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def run_owner_pid() -> int:
    """The process whose exit ends the run: the xdist controller (every worker's parent), or this pytest."""
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


@contextlib.contextmanager
def _flock(path: Path, how: int) -> Iterator[None]:
    with path.open("a") as f:
        fcntl.flock(f, how)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def run_lock(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[None]:
    """Hold the run's lock called `name`: tests on other workers that use a resource of fixed name (a group every
    one of them writes on the shared Neo4j) take it in turns."""
    with _flock(run_dir(tmp_path_factory) / f"{name}.lock", fcntl.LOCK_EX):
        yield


@contextlib.contextmanager
def run_turn(tmp_path_factory: pytest.TempPathFactory, *, alone: bool = False) -> Iterator[None]:
    """Hold the run's lock shared (alone: exclusively), as every test does. The gate lets an exclusive test that
    waits keep new tests from starting, so it is not starved by the other workers' overlapping ones. A
    module-scoped fixture that opens a store takes it too (fixtures of wider scope start before the test's turn):
    an opening store finishes another worker's journalled erasure, which an exclusive test may be watching."""
    root = run_dir(tmp_path_factory)
    with _flock(root / "turn.gate", fcntl.LOCK_EX):
        lock = _flock(root / "turn.lock", fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        lock.__enter__()
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


#: a wait for the run's turn at least this long is kept in the test's report and summed up at the end of the run
TURN_WAIT_REPORTED_S = 0.1
TURN_WAIT = "turn_wait_s"


@pytest.fixture(autouse=True)
def _turn(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test holds the run's lock shared, an `exclusive` test holds it alone. How long it waited for that is
    part of its setup time: kept in its report, so the run's summary tells the gate's waits from real setup work."""
    started = time.monotonic()
    with run_turn(tmp_path_factory, alone=request.node.get_closest_marker("exclusive") is not None):
        waited = time.monotonic() - started
        if waited >= TURN_WAIT_REPORTED_S:
            request.node.user_properties.append((TURN_WAIT, round(waited, 2)))
        yield


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The time tests spent at the gate (an exclusive test running or waiting on another worker), and the longest
    waits: a setup of tens of seconds that is a wait shows up here, not as work."""
    setups = [r for reports in terminalreporter.stats.values() for r in reports if getattr(r, "when", None) == "setup"]
    waits = [(dict(r.user_properties)[TURN_WAIT], r.nodeid) for r in setups if TURN_WAIT in dict(r.user_properties)]
    if not waits:
        return
    waits.sort(reverse=True)
    terminalreporter.section("waiting for the run's turn (exclusive tests)")
    terminalreporter.write_line(f"{sum(w for w, _ in waits):.1f} s in all, {len(waits)} tests waited "
                                f"{TURN_WAIT_REPORTED_S} s or more; the longest:")
    for waited, nodeid in waits[:8]:
        terminalreporter.write_line(f"{waited:8.1f} s  {nodeid}")


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


def empty_jetstream(url: str, timeout_s: float = 10, server: EmbeddedNatsServer | None = None) -> int:
    """Delete every stream on the server; how many. On a thread of its own, with its own event loop: a sync
    fixture may run while the test's loop exists. With `server` (ours), also wait until its disk holds none."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="empty-jetstream") as pool:
        deleted = pool.submit(asyncio.run, delete_every_stream(url, timeout_s)).result()
    if server is not None:
        wait_for_stream_files_gone(server, timeout_s)
    return deleted


def stream_dirs(server: EmbeddedNatsServer) -> list[Path]:
    """The stream folders in the server's JetStream store, every account."""
    return sorted(server.store_dir.glob("jetstream/*/streams/*"))


def wait_for_stream_files_gone(server: EmbeddedNatsServer, timeout_s: float = 10) -> None:
    """nats-server answers a stream's deletion before its files are gone from disk: a stream of the same name made
    in that window failed with "error creating store for stream" (fresh-clone CI, a lifecycle test's runtime), or
    came back holding the deleted one's messages (a known race of shared test servers). The next test makes the
    same stream names, so it starts only once the folders are gone."""
    deadline = time.monotonic() + timeout_s
    while (left := stream_dirs(server)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not left, f"nats-server still holds the files of deleted streams after {timeout_s} s: {left}"


@pytest.fixture
def fresh_nats_url(request: pytest.FixtureRequest) -> str:
    """The nats-server of this test: the session's, with no stream left from earlier tests, or for a test marked
    own_server its private one (the same `own_nats_server` the test may stop or restart)."""
    if request.node.get_closest_marker("own_server"):
        server: EmbeddedNatsServer = request.getfixturevalue("own_nats_server")
        assert server.url
        return server.url
    url: str = request.getfixturevalue("nats_url")
    empty_jetstream(url, server=request.getfixturevalue("nats_server"))
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
