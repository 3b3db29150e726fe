"""`/healthz` and `/readyz` beside `/metrics` on the metrics port: what an orchestrator probes.

Why: Kubernetes (deploy/kubernetes) and `mnemobus cluster` must tell, for each process, that it is alive
(its event loop still turns) and ready (connected to NATS, its roles started, not draining), from the
process itself: an open port says neither. The HTTP server runs on its own thread, so a stuck event
loop is seen as one (its heartbeat stops) instead of hanging the probe.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

import anyio
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import MetricsHandler

LOOP_STALL_S = 10.0  # an event loop that has not turned for this long is not alive
BEAT_S = 1.0


class Health:
    """What the probes report, set by the process as it starts, runs and stops."""

    def __init__(self, roles: set[str] | None = None) -> None:
        self.roles = sorted(roles or ())
        self.beat = time.monotonic()
        self.started = False
        self.stopping = False
        self.bus: Any = None  # mnemobus.bus.connection.Bus, once connected

    async def heartbeat(self, stop: anyio.Event) -> None:
        """Stamp the time every BEAT_S while the event loop turns."""
        while not stop.is_set():
            self.beat = time.monotonic()
            with anyio.move_on_after(BEAT_S):
                await stop.wait()

    def live(self) -> tuple[bool, str]:
        stalled = time.monotonic() - self.beat
        if stalled > LOOP_STALL_S:
            return False, f"the event loop has not turned for {stalled:.0f} s"
        return True, "event loop turning"

    def ready(self) -> tuple[bool, str]:
        if self.stopping:
            return False, "draining"
        if not self.started:
            return False, "starting"
        if self.bus is None or not self.bus.nc.is_connected:
            return False, "not connected to NATS (reconnecting)"
        alive, why = self.live()
        return (True, f"serving: {', '.join(self.roles)}") if alive else (False, why)


def serve_metrics(port: int, host: str, registry: CollectorRegistry, health: Health) -> ThreadingHTTPServer:
    """Prometheus text on every path but the two probes; on a daemon thread until `shutdown()`."""
    base = MetricsHandler.factory(registry)

    class Handler(base):  # type: ignore[misc, valid-type]
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook name
            path = urlparse(self.path).path
            if path not in ("/healthz", "/readyz"):
                super().do_GET()
                return
            ok, detail = health.live() if path == "/healthz" else health.ready()
            body = json.dumps({"status": "ok" if ok else "unavailable", "detail": detail}).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every few seconds: no log
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
