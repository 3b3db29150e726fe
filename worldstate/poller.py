"""The worldstate role: poll every domain, judge the goals on the whole snapshot, export, announce.

One poll builds one complete document (every probe of every domain, each
under its own timeout) before any goal is judged, so goals never see a
half-updated world. Series go into the registry the process already
exports; transitions go to `worldstate.goal.<id>` once per change.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from worldstate.evaluate import GoalResult, GoalTracker, Transition, evaluate
from worldstate.goals import WorldstateConfig, load_config
from worldstate.metrics import WorldstateMetrics
from mnemobus.kernel import extensions
from worldstate.probes import Domain, DomainFactory, ProbeContext, observe_domain

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime

log = logging.getLogger("mnemobus.worldstate")

#: keys under Runtime.extra where the role leaves what other roles (the API) may read
EXTRA_POLLER = "worldstate.poller"
EXTRA_CONFIG = "worldstate.config"
EXTRA_METRICS = "worldstate.metrics"


@dataclass(frozen=True)
class Snapshot:
    """One poll: the document served to the API and `mnemobus status`, and what it meant for the goals."""

    document: dict[str, Any]
    results: list[GoalResult]
    transitions: list[Transition]

    @property
    def all_ok(self) -> bool:
        return all(r.satisfied for r in self.results)


@dataclass
class Poller:
    ctx: ProbeContext
    metrics: WorldstateMetrics | None = None
    factories: tuple[DomainFactory, ...] = field(default_factory=lambda: tuple(extensions.probe_domains()))
    tracker: GoalTracker = field(default_factory=GoalTracker)
    latest: Snapshot | None = None

    def __post_init__(self) -> None:
        self.domains: list[Domain] = [f(self.ctx) for f in self.factories]
        if self.metrics is not None:
            self.metrics.declare(self.ctx.config.goals)

    @property
    def config(self) -> WorldstateConfig:
        return self.ctx.config

    def _on_probe(self, domain: str, probe: str, elapsed: float, failure: str | None) -> None:
        if self.metrics is None:
            return
        self.metrics.probe_seconds.labels(domain, probe).observe(elapsed)
        if failure:
            self.metrics.probe_failures.labels(domain, probe, failure).inc()

    async def collect(self) -> dict[str, Any]:
        """Every domain, concurrently; returns only when all are in."""
        sections: dict[str, Any] = {}

        async def one(d: Domain) -> None:
            sections[d.name] = await observe_domain(d, self.config.probe_timeout_s, self._on_probe)

        async with anyio.create_task_group() as tg:
            for d in self.domains:
                tg.start_soon(one, d)
        return {"collectedAt": datetime.now(timezone.utc).isoformat(),
                "domains": {name: sections[name] for name in sorted(sections)}}

    async def poll_once(self) -> Snapshot:
        document = await self.collect()
        now = datetime.now(timezone.utc)
        results = evaluate(self.config.goals, document, now, self.config.max_data_age_s)
        transitions = self.tracker.update(results, now)
        document["goals"] = {
            r.goal.id: {"state": self.tracker.public_state(r), "severity": r.goal.severity,
                        "satisfied": r.satisfied, "known": r.known, "value": r.value, "reason": r.reason,
                        "description": r.goal.description}
            for r in results
        }
        if self.metrics is not None:
            for name, section in document["domains"].items():
                self.metrics.domain_available.labels(name).set(1 if section["_available"] else 0)
            self.metrics.record(results, transitions)
            self.metrics.polls.inc()
            self.metrics.last_poll.set(now.timestamp())
        self.latest = Snapshot(document, results, transitions)
        return self.latest

    async def announce(self, transitions: list[Transition]) -> None:
        """Publish each transition; a publish failure is logged, never fatal to polling."""
        for t in transitions:
            level = logging.INFO if t.state == "ok" else logging.WARNING
            log.log(level, "goal %s (%s): %s -> %s: %s", t.goal.id, t.goal.severity, t.previous, t.state, t.result.reason)
            try:
                await self.ctx.bus.publish(t.goal.subject, json.dumps(t.to_json(), default=str).encode())
            except Exception as exc:
                log.error("could not publish the transition of goal %s: %s", t.goal.id, exc)

    async def run(self, stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        while not stop.is_set():
            try:
                snap = await self.poll_once()
                await self.announce(snap.transitions)
            except Exception:  # a bug in one poll must not end monitoring
                log.exception("world-state poll failed")
            if not started:
                task_status.started()
                started = True
            with anyio.move_on_after(self.config.poll_interval_s):
                await stop.wait()


def poller_for(rt: "Runtime", config: WorldstateConfig | None = None) -> Poller:
    """One poller per runtime, its series in the registry the process exports."""
    existing = rt.extra.get(EXTRA_POLLER)
    if isinstance(existing, Poller):
        return existing
    cfg = config or rt.extra.get(EXTRA_CONFIG) or load_config()
    metrics = rt.extra.get(EXTRA_METRICS)
    if metrics is None:
        metrics = rt.extra[EXTRA_METRICS] = WorldstateMetrics(rt.metrics.registry)
    poller = Poller(ProbeContext(rt.bus, rt.engine, rt.settings, rt.metrics, cfg), metrics)
    rt.extra[EXTRA_POLLER] = poller
    return poller


async def run_poller(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Role entry point: started once the first poll is done, returns when `rt.stop` is set."""
    poller = poller_for(rt)
    log.info("world-state poller: %d goal(s), every %.1fs", len(poller.config.goals), poller.config.poll_interval_s)
    await poller.run(rt.stop, task_status=task_status)


def current_document(rt: "Runtime") -> dict[str, Any] | None:
    """The last polled document, for the memory API; None before the first poll or without the role."""
    poller = rt.extra.get(EXTRA_POLLER)
    return poller.latest.document if isinstance(poller, Poller) and poller.latest else None
