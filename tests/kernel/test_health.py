"""The metrics port answers the probes an orchestrator asks: alive while the event loop turns, ready while
connected to NATS with its roles started, and still serves Prometheus text on every other path."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from mnemobus.kernel.health import Health, serve_metrics
from mnemobus.shared.ports import free_port


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class _Connected:
    class nc:  # noqa: N801 - the attribute a Bus has
        is_connected = True


def test_probes_report_starting_then_ready_then_draining_and_metrics_stay_on_other_paths() -> None:
    registry = CollectorRegistry()
    Counter("mnemobus_probe_test_total", "a series", registry=registry).inc()
    health = Health({"worker"})
    port = free_port()
    server = serve_metrics(port, "127.0.0.1", registry, health)
    try:
        assert _get(port, "/healthz")[0] == 200
        status, body = _get(port, "/readyz")
        assert status == 503 and json.loads(body)["detail"] == "starting"
        health.bus, health.started = _Connected(), True
        status, body = _get(port, "/readyz")
        assert status == 200 and json.loads(body)["detail"] == "serving: worker"
        _Connected.nc.is_connected = False
        assert json.loads(_get(port, "/readyz")[1])["detail"] == "not connected to NATS (reconnecting)"
        health.stopping = True
        assert json.loads(_get(port, "/readyz")[1])["detail"] == "draining"
        assert b"mnemobus_probe_test_total 1.0" in _get(port, "/metrics")[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_stalled_event_loop_is_not_alive() -> None:
    health = Health()
    health.beat = time.monotonic() - 60
    alive, why = health.live()
    assert not alive and "has not turned for 60 s" in why
