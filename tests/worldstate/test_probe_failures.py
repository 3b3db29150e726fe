"""Probes that cannot look make goals unknown, never ok, and say which probe failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from mnemobus.shared.config import Settings
from mnemobus.bus.server import EmbeddedNatsServer
from worldstate.probes import Domain, ProbeContext, bus_domain, memory_domain
from worldstate_support import goal_state, running_world, shipped_config

pytestmark = [pytest.mark.anyio, pytest.mark.own_server]


@dataclass
class HangingProbe:
    """A probe whose backend never answers (a wedged connection)."""

    name: str = "hang"

    async def observe(self) -> dict[str, Any]:
        await anyio.sleep_forever()
        return {}


def memory_with_a_hanging_probe(ctx: ProbeContext) -> Domain:
    real = memory_domain(ctx)
    return Domain(real.name, (*real.probes, HangingProbe()))


async def test_probe_that_hangs_makes_its_domain_unavailable_and_its_goals_unknown(settings: Settings) -> None:
    async with running_world(settings, shipped_config(probe_timeout_s=0.5)) as world:
        world.poller.domains = [memory_with_a_hanging_probe(world.poller.ctx), bus_domain(world.poller.ctx)]

        snap = await world.poller.poll_once()

        memory = snap.document["domains"]["memory"]
        assert memory["_available"] is False and "hang" in memory["errors"]
        assert goal_state(snap, "memory.store_healthy") == "unknown"
        assert goal_state(snap, "bus.connected") == "ok"
        assert world.gauge("mnemobus_goal_known", "memory.store_healthy") == 0.0
        assert world.rt.metrics.registry.get_sample_value(
            "mnemobus_worldstate_probe_failures_total", {"domain": "memory", "probe": "hang", "reason": "timeout"}) == 1.0


async def test_stopped_nats_server_fails_bus_goal_leaves_memory_goals_unknown_and_recovers(
        settings: Settings, own_nats_server: EmbeddedNatsServer) -> None:
    async with running_world(settings, shipped_config(probe_timeout_s=1)) as world:
        await world.poll_until(lambda s: goal_state(s, "bus.connected") == "ok")

        await anyio.to_thread.run_sync(own_nats_server.stop)
        snap = await world.poll_until(lambda s: goal_state(s, "bus.connected") == "violated")
        assert goal_state(snap, "bus.jetstream_ok") == "violated"
        assert goal_state(snap, "memory.worker_alive") == "unknown"  # cannot see heartbeats: not "ok"

        own_nats_server.spawn()  # on this thread: the server dies with the thread that forked it
        await anyio.to_thread.run_sync(own_nats_server.wait_ready)  # same port: the client reconnects
        await world.poll_until(lambda s: goal_state(s, "bus.connected") == "ok"
                               and goal_state(s, "memory.worker_alive") == "ok", timeout_s=20)
