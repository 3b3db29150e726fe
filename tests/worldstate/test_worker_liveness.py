"""A dead worker behind a healthy-looking service must raise the liveness goal; a restart clears it."""

from __future__ import annotations

import json

import anyio
import pytest

from mnemobus.shared.config import Settings
from worldstate_support import goal_state, running_world, shipped_config

pytestmark = pytest.mark.anyio


async def test_killed_worker_fails_liveness_goal_and_metric_then_recovers_on_restart(settings: Settings) -> None:
    async with running_world(settings, shipped_config()) as world:
        await world.poll_until(lambda s: goal_state(s, "memory.worker_alive") == "ok")
        assert world.gauge("mnemobus_goal_satisfied", "memory.worker_alive") == 1.0

        world.kill_worker()
        snap = await world.poll_until(lambda s: goal_state(s, "memory.worker_alive") == "violated")
        assert world.gauge("mnemobus_goal_satisfied", "memory.worker_alive") == 0.0
        assert world.gauge("mnemobus_goal_known", "memory.worker_alive") == 1.0
        assert goal_state(snap, "memory.store_healthy") == "ok"  # the health check alone would not have told

        await world.start_worker()
        await world.poll_until(lambda s: goal_state(s, "memory.worker_alive") == "ok")
        assert world.gauge("mnemobus_goal_satisfied", "memory.worker_alive") == 1.0


async def test_dead_worker_leaves_flow_canaries_unstored(settings: Settings) -> None:
    cfg = shipped_config()
    cfg = cfg.model_copy(update={"goals": [
        g.model_copy(update={"threshold": 1}) if g.id == "memory.pipeline_flowing" else g for g in cfg.goals]})
    async with running_world(settings, cfg) as world:
        await world.poll_until(lambda s: s.document["domains"]["memory"]["data"].get("canaryRoundTripS") is not None)
        world.kill_worker()
        snap = await world.poll_until(lambda s: goal_state(s, "memory.pipeline_flowing") == "violated")
        assert snap.document["domains"]["memory"]["data"]["canaryOutstanding"] >= 1


async def test_goal_transitions_are_published_once_per_change(settings: Settings) -> None:
    seen: list[dict] = []

    async with running_world(settings, shipped_config()) as world:
        async def collect(msg) -> None:  # type: ignore[no-untyped-def]
            seen.append(json.loads(msg.data))

        await world.poll_until(lambda s: goal_state(s, "memory.worker_alive") == "ok")
        await world.rt.bus.subscribe("worldstate.goal.memory.worker_alive", collect)
        world.kill_worker()
        await world.poll_until(lambda s: goal_state(s, "memory.worker_alive") == "violated")
        for _ in range(3):  # further polls in the same state announce nothing
            await world.poller.announce((await world.poller.poll_once()).transitions)
        await world.start_worker()
        await world.poll_until(lambda s: goal_state(s, "memory.worker_alive") == "ok")
        # a sentinel behind the transitions on the same connection: once it arrives, so has every transition
        await world.rt.bus.publish("worldstate.goal.memory.worker_alive", b'{"sentinel": true}')
        with anyio.fail_after(5):
            while not any(m.get("sentinel") for m in seen):
                await anyio.sleep(0.01)

    seen = [m for m in seen if not m.get("sentinel")]
    assert [(m["previous"], m["state"], m["event"]) for m in seen] == [("ok", "violated", "firing"),
                                                                       ("violated", "ok", "resolved")]
    assert {m["severity"] for m in seen} == {"critical"}
