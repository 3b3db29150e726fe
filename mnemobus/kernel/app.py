"""Assembly: config -> bus -> engine -> roles, started and stopped as one unit.

Everything a process opens enters one exit stack or task group; SIGINT and
SIGTERM set one event, and the stack unwinds in order: plugins drain, the
worker finishes its batch, the bus drains, the embedded server stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import anyio
from pydantic import SecretStr

from mnemobus.kernel import extensions
from mnemobus.bus.connection import Bus
from mnemobus.bus.permissions import EMBEDDED_USER, nats_single_user
from mnemobus.bus.server import EmbeddedNatsServer
from mnemobus.shared.config import NatsSettings, Settings
from mnemobus.shared.errors import MnemobusError
from mnemobus.kernel.health import Health, serve_metrics
from mnemobus.kernel.eventloop import running_loop_name
from mnemobus.kernel.heap import freeze_long_lived, serving_process
from mnemobus.shared.identity import IdentityRegistry
from mnemobus.shared.metrics import PipelineMetrics
from mnemobus.kernel.peers import check_same_store
from mnemobus.kernel.plugin import Plugin
from mnemobus.shared.private_files import write_private
from mnemobus.kernel.runtime import Runtime
from mnemobus.kernel.warming import warm_engine
from mnemobus.store.contract import ReportsCacheCrowding, ReportsDeadlocks, ReportsReadsOffLoop

log = logging.getLogger("mnemobus.app")

def expand_roles(role: str) -> set[str]:
    """`all` means every role this build registers; a named role must exist."""
    registered = extensions.roles()
    if role == "all":  # a role that needs something configured first (`in_all = False`) runs only when named
        return {name for name, start in registered.items() if getattr(start, "in_all", True)}
    if role not in registered:
        raise MnemobusError(f"role {role!r} is not available in this build; it has: {', '.join(sorted(registered))}")
    return {role}


def with_worker_on_embedded_bus(roles: set[str], *, embedded: bool) -> set[str]:
    """A role that queues episodes (api, plugin, mcp) on a bus this process embeds gets the worker too: no other
    process can reach that bus, so without it every 202 would go into a stream nobody reads."""
    if embedded and roles & {"api", "plugin", "mcp"} and "worker" not in roles:
        log.info("the bus is embedded in this process, so the extraction worker runs here too")
        return roles | {"worker"}
    return roles


class DataDirInUse(MnemobusError):
    """`mnemobus run` without a URL on a data directory whose embedded nats-server another process runs."""


def tcp_refusal(host: str, port: int, timeout_s: float) -> str | None:
    """Why nothing answers a TCP connect at host:port ("Connection refused", "timed out"), or None when something
    does: a server that is not there, told apart from one that is before a client's retry loop hides the reason."""
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        return (os.strerror(exc.errno) if exc.errno else str(exc)) or type(exc).__name__
    return None


def running_embedded_url(data_dir: Path) -> str | None:
    """The URL (with its credentials) of the embedded nats-server a running process owns on `data_dir`, or None.

    The owner writes `<data_dir>/embedded-url` once its server is up and removes it at exit; a file left by a
    process that was killed names a port nobody answers on, so a TCP connect tells the two apart."""
    try:
        url = (data_dir / "embedded-url").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    parts = urlsplit(url)
    if not url or parts.hostname is None or parts.port is None:
        return None
    return None if tcp_refusal(parts.hostname, parts.port, 1) else url


def _without_credentials(url: str, nats: NatsSettings) -> tuple[str, NatsSettings]:
    parts = urlsplit(url)
    clean = urlunsplit(parts._replace(netloc=f"{parts.hostname}:{parts.port}"))
    return clean, nats.model_copy(update={"user": unquote(parts.username or "") or None,
                                          "password": SecretStr(unquote(parts.password or "")) if parts.password
                                          else None, "permissions_enforced": True})


@contextlib.asynccontextmanager
async def nats_url(settings: Settings, *, own: bool = False) -> AsyncIterator[tuple[str, EmbeddedNatsServer | None,
                                                                                    NatsSettings]]:
    """The configured URL, or an embedded server's for as long as the block runs, with the settings to connect by.

    The embedded server has one user, this process, with a password made for this start: another local process
    cannot publish a request or an episode on it, so what its messages claim comes from this process
    (`permissions_enforced`). Its URL with the credentials is written, readable by the owner only, to
    `<nats.data_dir>/embedded-url` for a local tool the owner wants to connect.

    When a running process already owns the data directory's server, a second one is never started on it (two
    servers on one JetStream directory, and the second deleting the first's `embedded-url` at exit, issue 41):
    a command (`own=False`: doctor, status, dlq, memory, mcp) joins the running one as its owner's user; a
    process that would own the bus (`own=True`: `mnemobus run`) refuses, saying how to join it instead."""
    if settings.nats.url:
        yield settings.nats.url, None, settings.nats
        return
    if running := running_embedded_url(settings.nats.data_dir):
        url_file = settings.nats.data_dir / "embedded-url"
        if own:
            raise DataDirInUse(f"{settings.nats.data_dir} is in use: a running mnemobus serves its nats-server "
                               f"({_without_credentials(running, settings.nats)[0]}); stop it first, or run this "
                               f"next to it on its bus: MNEMOBUS_NATS__URL=\"$(cat {url_file})\" mnemobus run ...")
        log.info("using the running nats-server of %s (from %s)", settings.nats.data_dir, url_file)
        url, connect = _without_credentials(running, settings.nats)
        yield url, None, connect
        return
    password = secrets.token_urlsafe(24)
    server = EmbeddedNatsServer(settings.nats.data_dir, config=nats_single_user(EMBEDDED_USER, password))
    await server.start_async()
    url = server.url or ""
    connect = settings.nats.model_copy(update={"user": EMBEDDED_USER, "password": SecretStr(password),
                                               "permissions_enforced": True})
    url_file = write_private(settings.nats.data_dir / "embedded-url",
                             url.replace("nats://", f"nats://{EMBEDDED_USER}:{password}@", 1) + "\n")
    try:
        yield url, server, connect
    finally:
        url_file.unlink(missing_ok=True)
        await anyio.to_thread.run_sync(server.stop)


def default_plugins(settings: Settings, *, demo: bool) -> list[Plugin]:
    """The bus plugins installed packages register (the memory plugin; the echo executor in the demo)."""
    return extensions.bus_plugins(settings, demo=demo)


async def _reload_identity(identity: IdentityRegistry, interval_s: float, stop: anyio.Event) -> None:
    while not stop.is_set():
        with anyio.move_on_after(interval_s):
            await stop.wait()
        identity.maybe_reload()


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s; draining in-flight work", signal.Signals(signum).name)
            stop.set()
            return


@contextlib.asynccontextmanager
async def open_runtime(settings: Settings, *, need_engine: bool = True, own_bus: bool = False, warm: bool = True,
                       metrics: PipelineMetrics | None = None) -> AsyncIterator[Runtime]:
    """Connect everything a role needs; close it all in reverse order.

    On a bus this process did not start, an engine is opened only on the store the workers there write
    (`peers.check_same_store`). `warm=False` leaves loading the embedder to the caller (`warm_engine`), for a door
    that must answer before it is done (MCP: the client's handshake would wait for a first build)."""
    from mnemobus.kernel.backends import open_engine

    metrics = metrics or PipelineMetrics()
    async with nats_url(settings, own=own_bus) as (url, server, nats_settings):
        settings = settings.model_copy(update={"nats": nats_settings})
        bus = await Bus.connect(url, settings.nats, name=f"mnemobus-{socket.gethostname()}-{os.getpid()}",
                                count_error=lambda kind: metrics.bus_errors.labels(kind=kind).inc())
        try:
            await bus.ensure_streams()
            if need_engine and server is None:
                await check_same_store(bus, settings.store, unread=metrics.store_check_unread.inc)
            identity = IdentityRegistry(settings.identity.users_file,
                                        on_reload=lambda o: metrics.identity_reloads.labels(outcome=o).inc())
            engine = await open_engine(settings, metrics.llm) if need_engine else None
            if engine is not None:
                engine.observe_graph_skips(lambda _group, _ms: metrics.graph_hops_skipped.inc())
                if isinstance(engine.store, ReportsDeadlocks):
                    engine.store.observe_deadlocks(lambda outcome: metrics.store_deadlocks.labels(outcome=outcome).inc())
                if isinstance(engine.store, ReportsCacheCrowding):
                    engine.store.observe_vector_cache_crowded(
                        lambda table: metrics.vector_cache_crowded.labels(table=table).inc())
                if isinstance(engine.store, ReportsReadsOffLoop):
                    engine.store.observe_reads_off_loop(lambda reason: metrics.reads_off_loop.labels(reason=reason).inc())
                engine.observe_extractor_failures(metrics.parse_child_failures.inc)
            if engine is not None and warm:
                await warm_engine(engine)
            try:
                yield Runtime(settings, bus, metrics, identity, engine, anyio.Event(), server, url)
            finally:
                if engine is not None:
                    await engine.close()
        finally:
            await bus.close()


async def serve(rt: Runtime, roles: set[str], *, plugins: list[Plugin] | None = None,
                echo: Callable[[str], None] | None = None,
                task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Run the given roles until `rt.stop` is set."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_reload_identity, rt.identity, rt.settings.identity.reload_interval_s, rt.stop)
        rt.plugins, rt.echo = plugins, echo
        for name, start in extensions.roles().items():  # registration order: the worker first
            if name in roles:
                await tg.start(start, rt)
        task_status.started()
        await rt.stop.wait()


async def run(settings: Settings, role: str, *, demo: bool = False, once: bool = False,
              echo: Callable[[str], None] | None = None) -> int:
    """The process entry point behind `mnemobus run`."""
    serving_process()
    roles = with_worker_on_embedded_bus(expand_roles(role), embedded=settings.nats.url is None)
    metrics = PipelineMetrics()
    health = Health(roles)
    http = serve_metrics(settings.metrics.port, settings.metrics.host, metrics.registry, health) \
        if settings.metrics.port else None
    try:
        return await _run(settings, roles, metrics, health, demo=demo, once=once, echo=echo)
    finally:
        if http is not None:
            http.shutdown()
            http.server_close()


async def _run(settings: Settings, roles: set[str], metrics: PipelineMetrics, health: Health, *, demo: bool,
               once: bool, echo: Callable[[str], None] | None) -> int:
    # the roles that read or write memory; `mcp` was missing, so `--role mcp` alone had no engine (issue 34)
    async with open_runtime(settings, need_engine=bool(roles & {"plugin", "worker", "api", "worldstate", "mcp"}),
                            own_bus=True, warm=not roles <= {"mcp", "worker"}, metrics=metrics) as rt:
        health.bus = rt.bus
        if echo:
            echo(f"[bus] {'embedded nats-server at ' if rt.server else 'connected to '}{rt.url}; "
                 f"roles: {', '.join(sorted(roles))}; store: {settings.store.backend}; "
                 f"event loop: {running_loop_name()}")
            if settings.metrics.port:
                echo(f"[metrics] http://{settings.metrics.host}:{settings.metrics.port}/metrics "
                     "(/healthz, /readyz for probes)")
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, rt.stop)
            tg.start_soon(health.heartbeat, rt.stop)
            plugins = default_plugins(settings, demo=demo)
            await tg.start(lambda task_status: serve(rt, roles, plugins=plugins, echo=echo, task_status=task_status))
            health.started = True
            freeze_long_lived("started")  # the embedder, the parser, the bus: loaded for the process's life
            if demo:
                from mnemobus.kernel.demo import run_demo

                ok = await run_demo(rt, echo or (lambda s: None))
                if once:
                    rt.stop.set()
                    if not ok:
                        tg.cancel_scope.cancel()
                        return 1
                elif echo:
                    echo("[demo] done; still serving on agent.skill.request. Press Ctrl-C to stop.")
            await rt.stop.wait()
            health.stopping = True
            tg.cancel_scope.cancel()
    return 0
