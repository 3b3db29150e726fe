"""A running slice of the pipeline for world-state tests: real bus, real engine, a worker we can kill."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import TaskGroup, TaskStatus

from mnemobus.kernel.app import Runtime, open_runtime
from mnemobus.shared.config import Settings
from mnemobus.kernel.worker import EpisodeWorker
from worldstate.goals import WorldstateConfig, load_config
from worldstate.poller import Poller, Snapshot, poller_for

GOALS_FILE = Path(__file__).resolve().parents[2] / "workspace" / "goals.yaml"


def shipped_config(**overrides: object) -> WorldstateConfig:
    """The goals we ship, with `for` set to zero so a test sees a state change on the next poll."""
    cfg = load_config(GOALS_FILE)
    goals = [g.model_copy(update={"for_s": 0.0}) for g in cfg.goals]
    return cfg.model_copy(update={"goals": goals, "poll_interval_s": 0.1, "probe_timeout_s": 3,
                                  "heartbeat_max_age_s": 1.0, **overrides})


@dataclass
class World:
    rt: Runtime
    tg: TaskGroup
    poller: Poller
    _worker_scope: anyio.CancelScope | None = None
    _ids: itertools.count = field(default_factory=itertools.count)

    async def _worker(self, *, task_status: TaskStatus[None]) -> None:
        with anyio.CancelScope() as scope:
            self._worker_scope = scope
            worker = EpisodeWorker(self.rt.bus, self.rt.engine, self.rt.settings, self.rt.metrics,
                                   instance_id=f"test-worker-{next(self._ids)}")
            await worker.run(anyio.Event(), task_status=task_status)

    async def start_worker(self) -> None:
        await self.tg.start(self._worker)

    def kill_worker(self) -> None:
        """Cancel the worker abruptly: no goodbye heartbeat, as when its process dies."""
        assert self._worker_scope is not None
        self._worker_scope.cancel()
        self._worker_scope = None

    async def poll_until(self, predicate: Callable[[Snapshot], bool], timeout_s: float = 10) -> Snapshot:
        """Poll at the configured interval until the predicate holds; fail with the last document otherwise."""
        snap: Snapshot | None = None
        with anyio.move_on_after(timeout_s):
            while True:
                snap = await self.poller.poll_once()
                await self.poller.announce(snap.transitions)
                if predicate(snap):
                    return snap
                await anyio.sleep(self.poller.config.poll_interval_s)
        raise AssertionError(f"condition not reached in {timeout_s}s; last goals: "
                             f"{snap.document.get('goals') if snap else None}")

    def gauge(self, name: str, goal: str) -> float | None:
        sev = next(g.severity for g in self.poller.config.goals if g.id == goal)
        return self.rt.metrics.registry.get_sample_value(name, {"goal": goal, "severity": sev})


def goal_state(snap: Snapshot, goal: str) -> str:
    return str(snap.document["goals"][goal]["state"])


@contextlib.asynccontextmanager
async def running_world(settings: Settings, config: WorldstateConfig, *, worker: bool = True) -> AsyncIterator[World]:
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            world = World(rt, tg, poller_for(rt, config))
            if worker:
                await world.start_worker()
            yield world
            tg.cancel_scope.cancel()
