"""Every role as its own process on a local NATS cluster and Neo4j: `mnemobus cluster` and the chaos tests.

Why: a deployment runs each role (plugin, worker, api, worldstate) as separate processes, scaled on
their own, against a NATS cluster with replicated JetStream and a shared Neo4j. This starts exactly
that on one machine, without Docker: three clustered nats-servers (mnemobus.bus.cluster), the local
Neo4j (mnemobus.kernel.neo4j_local) and `mnemobus run --role <role>` processes, each told where everything is
through the same `MNEMOBUS_*` variables a container gets, each probed on its own `/readyz`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mnemobus.bus.cluster import LocalNatsCluster
from mnemobus.bus.server import _die_with_parent
from mnemobus.shared.errors import MnemobusError
from mnemobus.kernel.neo4j_local import LocalNeo4j
from mnemobus.shared.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


class DeploymentError(MnemobusError):
    """A process of the local deployment did not start or become ready; the message says which and why."""


@dataclass
class RoleProcess:
    """One `mnemobus run --role <role>` process, with its own metrics port (where /readyz answers) and log."""

    name: str
    role: str
    env: dict[str, str]
    metrics_port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Spawn from a thread that lives as long as the process (it dies with that thread, see _die_with_parent)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mnemobus.cli", "run", "--role", self.role, "--quiet"], cwd=ROOT, env=self.env,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
                start_new_session=True)  # a Ctrl-C in the terminal reaches the supervisor, which stops us in order

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=1) as r:
                return r.status == 200 and json.loads(r.read()).get("status") == "ok"
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def wait_ready(self, timeout_s: float = 120.0) -> float:
        """Block until /readyz says ok; the seconds waited. DeploymentError when the process exits or times out."""
        t0 = time.monotonic()
        while not self.ready():
            if not self.running():
                raise DeploymentError(f"{self.name} exited with code {self.proc.returncode if self.proc else '?'} "
                                      f"before it was ready:\n{self.log_tail()}")
            if time.monotonic() - t0 > timeout_s:
                raise DeploymentError(f"{self.name} not ready within {timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)
        return time.monotonic() - t0

    def kill(self) -> None:
        """kill -9: nothing drained, nothing acknowledged that was not already."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (the process drains: plugins finish requests, workers their batch), then SIGKILL if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class LocalDeployment:
    """A NATS cluster, a Neo4j and role processes under `root`; `start()` brings them up in order, `stop()` down.

    `neo4j_uri`: use that server instead of starting one. `env`: further `MNEMOBUS_*` settings every role gets
    (they win over the environment this process runs in, which the roles inherit).
    """

    root: Path
    plugins: int = 2
    workers: int = 2
    api: bool = True
    worldstate: bool = True
    nats_nodes: int = 3
    replicas: int = 3
    neo4j_uri: str | None = None
    neo4j_heap: str = "512m"
    env: dict[str, str] = field(default_factory=dict)
    say: Callable[[str], None] = lambda line: None
    cluster: LocalNatsCluster | None = None
    neo4j: LocalNeo4j | None = None
    roles: list[RoleProcess] = field(default_factory=list)

    @property
    def uri(self) -> str:
        if self.neo4j_uri:
            return self.neo4j_uri
        if self.neo4j is None:
            raise DeploymentError("Neo4j is not started")
        return self.neo4j.uri

    def role_env(self, name: str, metrics_port: int) -> dict[str, str]:
        """The settings a role process gets: where NATS and Neo4j are, and what is its own."""
        assert self.cluster is not None
        env = dict(os.environ)
        env.update({
            "MNEMOBUS_NATS__URL": self.cluster.url,
            "MNEMOBUS_NATS__STREAMS__REPLICAS": str(self.replicas),
            "MNEMOBUS_STORE__BACKEND": "neo4j",
            "MNEMOBUS_STORE__NEO4J__URI": self.uri,
            "MNEMOBUS_METRICS__HOST": "127.0.0.1",
            "MNEMOBUS_METRICS__PORT": str(metrics_port),
            "MNEMOBUS_MEMORY__OUTBOX_PATH": str(self.root / "outbox" / f"{name}.sqlite3"),
            **self.env,
        })
        return env

    def add_role(self, role: str, name: str) -> RoleProcess:
        port = free_port()
        proc = RoleProcess(name, role, self.role_env(name, port), port, self.root / "logs" / f"{name}.log")
        self.roles.append(proc)
        return proc

    def role(self, name: str) -> RoleProcess:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(f"no role process {name!r} ({', '.join(r.name for r in self.roles)})")

    def start(self) -> None:
        """Cluster, then Neo4j, then every role (started side by side, then each waited for)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.cluster = LocalNatsCluster(self.root / "nats", self.nats_nodes)
        t0 = time.monotonic()
        self.cluster.start()
        self.say(f"[cluster] {self.nats_nodes} nats-servers with JetStream up in {time.monotonic() - t0:.1f} s: "
                 f"{self.cluster.url}")
        if not self.neo4j_uri:
            self.neo4j = LocalNeo4j(home=self.root / "neo4j", heap=self.neo4j_heap)
            self.neo4j.start()
            self.say(f"[neo4j] Neo4j 5.26 up in {self.neo4j.started_in_s:.1f} s: {self.neo4j.uri} "
                     f"(data in {self.root / 'neo4j'})")
        wanted = [("plugin", self.plugins), ("worker", self.workers), ("api", int(self.api)),
                  ("worldstate", int(self.worldstate))]
        for role, count in wanted:
            for i in range(1, count + 1):
                self.add_role(role, f"{role}-{i}" if count > 1 or role in ("plugin", "worker") else role)
        # the first worker declares the streams and the durable consumer; the others find them
        for proc in self.roles:
            proc.start()
        for proc in self.roles:
            waited = proc.wait_ready()
            self.say(f"[{proc.name}] pid {proc.pid} ready in {waited:.1f} s; "
                     f"health http://127.0.0.1:{proc.metrics_port}/readyz, log {proc.log_path}")

    def stop(self) -> None:
        """Roles first (each drains), then Neo4j, then the cluster."""
        for proc in reversed(self.roles):
            proc.stop()
        if self.neo4j is not None:
            self.neo4j.stop()
        if self.cluster is not None:
            self.cluster.stop()
