"""One deployment for the chaos tests: 3 clustered nats-servers (streams at 3 replicas), a Neo4j of their own
(one test restarts it), 2 memory plugins and 2 workers, each its own `mnemobus run --role` process.

Every test starts from a whole system (what an earlier test stopped is started again before the next one
runs), breaks one part under steady load, and accounts for every request and episode. The figures each
test measured are printed at the end of the run (and written to $MNEMOBUS_CHAOS_REPORT when set).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from mnemobus.kernel.app import open_runtime
from mnemobus.kernel.localcluster import LocalDeployment
from mnemobus.kernel.neo4j_local import LocalNeo4j, LocalNeo4jError, ensure_jars
from mnemobus.kernel.plugin import PluginContext
from mnemobus.kernel.runner import run_plugins
from mnemobus.store.neo4j import Neo4jStore
from plugins.echo import EchoExecutor
from tests.chaos.chaos_support import CHAOS_ENV, FIGURES, Chaos, Client

@pytest.fixture(scope="module")
def chaos_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chaos]:
    root = tmp_path_factory.mktemp("chaos")
    try:
        ensure_jars()
        neo4j = LocalNeo4j(home=root / "neo4j", heap="512m", pagecache="128m")
        neo4j.start()
    except LocalNeo4jError as exc:
        pytest.fail(f"the chaos tests' Neo4j could not start: {exc}", pytrace=False)
    deployment = LocalDeployment(root, plugins=2, workers=2, api=False, worldstate=False, nats_nodes=3,
                                 replicas=3, neo4j_uri=neo4j.uri, env=CHAOS_ENV)
    try:
        deployment.start()
        yield Chaos(deployment, neo4j)
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


@pytest.fixture
async def client(system: Chaos) -> AsyncIterator[Client]:
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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("chaos: what each disruption cost")
    for test, figures in FIGURES.items():
        terminalreporter.write_line(f"{test}: " + ", ".join(f"{k}={v}" for k, v in sorted(figures.items())))
