"""`mnemobus cluster` (`make cluster-run`): what a deployment runs, on this machine, with the demo played through it.

Three clustered nats-servers (JetStream, streams and consumer at 3 replicas), the local Neo4j, two memory
plugins, two workers, the memory API and the world-state poller, each its own process (see localcluster).
This process plays the demo conversation through them with an echo executor, says where everything is,
and on Ctrl-C stops the roles (each drains), then Neo4j, then the nats-servers.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

import anyio

from mnemobus.shared import subjects
from mnemobus.bus.cluster import stream_leader
from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel.localcluster import DeploymentError, LocalDeployment
from mnemobus.kernel import eventloop


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("cluster", help="3 clustered nats-servers, Neo4j and every role as its own process; plays "
                       "the demo (Ctrl-C stops everything)")
    p.add_argument("--plugins", type=int, default=2, help="memory plugin processes (default 2)")
    p.add_argument("--workers", type=int, default=2, help="extraction worker processes (default 2)")
    p.add_argument("--data-dir", type=Path, default=Path("data/cluster"),
                   help="the nats-servers' streams, Neo4j's database, logs and outboxes (kept between runs)")
    p.add_argument("--once", action="store_true", help="stop everything after the demo (exit 0 when it worked)")
    p.set_defaults(handler=run_cluster)


def _say(line: str) -> None:
    print(line, flush=True)


def run_cluster(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.engine.embedders import make_embedder

    # each node's and plugin's start: said below instead (loggers by name: a logger keeps its name when its module moves)
    for noisy in (logging.getLogger("mnemobus.bus.server"), logging.getLogger("mnemobus.runner")):
        noisy.setLevel(logging.WARNING)
    emb = settings.memory.embedding
    make_embedder(emb.provider, emb.model, emb.cache_dir)  # a static table is built here once, not by every role
    deployment = LocalDeployment(args.data_dir.resolve(), plugins=args.plugins, workers=args.workers, say=_say)
    try:
        deployment.start()
        return eventloop.run(lambda: _play_and_serve(deployment, settings, args.once), settings.event_loop)
    except DeploymentError as exc:
        _say(f"[cluster] {exc}")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        _say("[cluster] stopping: roles first (each drains), then Neo4j, then the nats-servers")
        deployment.stop()
        _say("[cluster] stopped")


def client_settings(settings: Settings, deployment: LocalDeployment) -> Settings:
    """This process's own settings: a client of the deployment (no metrics port of its own)."""
    assert deployment.cluster is not None
    nats = settings.nats.model_copy(update={
        "url": deployment.cluster.url,
        "streams": settings.nats.streams.model_copy(update={"replicas": deployment.replicas})})
    store = settings.store.model_copy(update={
        "backend": "neo4j", "neo4j": settings.store.neo4j.model_copy(update={"uri": deployment.uri})})
    return settings.model_copy(update={"nats": nats, "store": store,
                                       "metrics": settings.metrics.model_copy(update={"port": 0})})


async def _play_and_serve(deployment: LocalDeployment, settings: Settings, once: bool) -> int:
    from mnemobus.kernel.app import _watch_signals, open_runtime, serve
    from mnemobus.kernel.demo import run_demo
    from mnemobus.kernel import extensions

    async with open_runtime(client_settings(settings, deployment)) as rt:
        info = await rt.bus.js.stream_info(subjects.EPISODE_STREAM)
        consumer = await rt.bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
        _say(f"[cluster] stream {subjects.EPISODE_STREAM}: {info.config.num_replicas} replicas, leader "
             f"{await stream_leader(rt.bus.js, subjects.EPISODE_STREAM)}; consumer {subjects.WORKER_DURABLE}: "
             f"{consumer.config.num_replicas} replicas, shared by {deployment.workers} worker(s)")
        _say(f"[cluster] {deployment.plugins} memory plugin(s) share agent.skill.request (queue group "
             f"{subjects.PLUGIN_QUEUE}); this process runs the echo executor and plays the demo")
        if deployment.api:
            _say(f"[cluster] memory API: http://{settings.api.host}:{settings.api.port}/healthcheck")
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, rt.stop)
            tg.start_soon(_watch_roles, deployment, rt.stop)
            await tg.start(lambda task_status: serve(rt, {"plugin"}, plugins=extensions.demo_plugins(settings), echo=_say,
                                                     task_status=task_status))
            ok = await run_demo(rt, _say)
            if once:
                rt.stop.set()
            else:
                _say("\n[cluster] demo done; everything keeps serving. Try `kill -9` on a worker or a nats-server "
                     "(pids above) and talk to it again. Ctrl-C stops everything.")
            await rt.stop.wait()
            tg.cancel_scope.cancel()
    return 0 if ok else 1


async def _watch_roles(deployment: LocalDeployment, stop: Any) -> None:
    """Say when a role process exits while the cluster runs (it is not restarted: this is a demonstration)."""
    gone: set[str] = set()
    while not stop.is_set():
        for proc in deployment.roles:
            if proc.name not in gone and not proc.running():
                gone.add(proc.name)
                _say(f"[cluster] {proc.name} (pid {proc.pid}) exited with code {proc.proc.returncode if proc.proc else '?'}; "
                     f"the others go on. Log: {proc.log_path}")
        with anyio.move_on_after(1.0):
            await stop.wait()
