"""One deployment for the chaos tests: 3 clustered nats-servers (streams at 3 replicas), a Neo4j of their own
(one test restarts it), 2 memory plugins and 2 workers, each its own `mnemobus run --role` process.
Its Neo4j plans a cached query again at most once a minute, and not again for each size class of a list parameter
(FEW_PLANS: from an empty database every write moves its statistics, and it replanned 111 times in one run of this
file at Neo4j's default of 10 s), and runs the client JIT only (QUICK_START_JVM): planning was ~60% of its Java
samples and the C2 compiler threads 52 of its 135 s of CPU. The restarted-Neo4j test's whole CPU (the server's
nearly all of it), alternated, load 5-11: 175 / 137 s as it was, 95 / 97 s with both.

The deployment is warmed before the first test: a short load through the whole pipeline, until every episode
it left is stored. A Neo4j that has just started plans every query afresh on a cold JVM: under the chaos load the
workers' first batches (of one episode) took 20-38 s to store, waiting on the server's answer to their first read,
in whichever test came first (the killed plugin, run first: a 56 s drain, 11.5 s when second), so the first test
(the killed stream leader) measured Neo4j's start, not NATS's recovery. Warmed here, in the module's setup, it is paid before the tests' exclusive turn and out of their
figures; the restarted-Neo4j test still meets a cold server, which is what it is about.

Every test starts from a whole system (what an earlier test stopped is started again before the next one
runs), breaks one part under steady load, and accounts for every request and episode. The figures each
test measured are printed at the end of the run (and written to $MNEMOBUS_CHAOS_REPORT when set).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from mnemobus.kernel.app import open_runtime
from mnemobus.kernel.localcluster import LocalDeployment
from mnemobus.kernel.neo4j_local import FEW_PLANS, QUICK_START_JVM, LocalNeo4j, LocalNeo4jError, ensure_jars
from mnemobus.kernel.plugin import PluginContext
from mnemobus.kernel.runner import run_plugins
from mnemobus.store.neo4j import Neo4jStore
from plugins.echo import EchoExecutor
from tests.chaos.chaos_support import CHAOS_ENV, FIGURES, Chaos, Client, Load, record, stored_exactly, wait_stored

WARM_UP_RATE_HZ = 6.0
WARM_UP_S = 2.0  # 12 requests, one per user of a chaos load: 24 episodes, every role and query path used once
WARM_UP_LIMIT_S = 180.0  # a cold Neo4j beside three other workers: what warming may take at the latest


@pytest.fixture(scope="module")
def chaos_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    root = tmp_path_factory.mktemp("chaos")
    try:
        ensure_jars()
        neo4j = LocalNeo4j(home=root / "neo4j", heap="512m", pagecache="128m", conf=FEW_PLANS,
                           jvm_options=QUICK_START_JVM)
        neo4j.start()
    except LocalNeo4jError as exc:
        pytest.fail(f"the chaos tests' Neo4j could not start: {exc}", pytrace=False)
    deployment = LocalDeployment(root, plugins=2, workers=2, api=False, worldstate=False, nats_nodes=3,
                                 replicas=3, neo4j_uri=neo4j.uri, env=CHAOS_ENV)
    try:
        deployment.start()
        system = Chaos(deployment, neo4j)
        anyio.run(warm_up, system)
        yield system
    finally:
        deployment.stop()
        neo4j.stop()


@pytest.fixture
async def system(chaos_system: Chaos) -> Chaos:
    """The whole system, running: every node healthy and every role ready (restarted when a test left it down)."""
    for n in chaos_system.cluster.nodes:
        chaos_system.cluster.resume(n.name)
        chaos_system.cluster.spawn(n.name)  # on this (the main) thread: a node dies with the thread that forked it
    await anyio.to_thread.run_sync(chaos_system.cluster.wait_ready)
    if chaos_system.neo4j.proc is None or chaos_system.neo4j.proc.poll() is not None:
        await anyio.to_thread.run_sync(chaos_system.neo4j.restart)
    for proc in chaos_system.deployment.roles:
        if not proc.running():
            proc.start()
    for proc in chaos_system.deployment.roles:
        await anyio.to_thread.run_sync(proc.wait_ready)
    return chaos_system


@contextlib.asynccontextmanager
async def connected(system: Chaos) -> AsyncIterator[Client]:
    """A bus connection with an echo executor behind it, and a store to count in."""
    settings = system.settings()
    store = Neo4jStore(system.neo4j.uri, vector_cache_mb=None)
    await store.open()
    try:
        async with open_runtime(settings, need_engine=False) as rt:
            ctx = PluginContext(rt.bus, settings, rt.metrics, logging.getLogger("chaos.executor"), rt.identity)
            async with anyio.create_task_group() as tg:
                await tg.start(run_plugins, [EchoExecutor("echo")], ctx, rt.stop)
                yield Client(rt, store)
                rt.stop.set()
    finally:
        await store.close()


async def warm_up(system: Chaos) -> None:
    """A short load through the whole deployment, until every episode it left is stored (see the module's doc)."""
    started = time.monotonic()
    async with connected(system) as client:
        load = Load(f"warm-up-{uuid.uuid4().hex[:6]}", int(WARM_UP_RATE_HZ * WARM_UP_S))
        await load.run(client.rt.bus, WARM_UP_RATE_HZ, WARM_UP_S)
        expected = load.expected_episodes(client.rt.identity)
        drain = await wait_stored(client.store, expected, WARM_UP_LIMIT_S)
        found, _ = await stored_exactly(client.store, expected)
    want = sum(len(ids) for ids in expected.values())
    record("warm_up", {"answered": load.answered(), "requests": len(load.asked), "episodes_found": found,
                       "drain_s": round(drain, 1), "total_s": round(time.monotonic() - started, 1)})
    if load.answered() < len(load.asked) or found < want:
        pytest.fail(f"the chaos deployment did not warm up within {WARM_UP_LIMIT_S:.0f} s: {load.answered()} of "
                    f"{len(load.asked)} requests answered, {found} of {want} episodes stored", pytrace=False)


@pytest.fixture
async def client(system: Chaos) -> AsyncIterator[Client]:
    async with connected(system) as client:
        yield client


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("chaos: what each disruption cost")
    for test, figures in FIGURES.items():
        terminalreporter.write_line(f"{test}: " + ", ".join(f"{k}={v}" for k, v in sorted(figures.items())))
