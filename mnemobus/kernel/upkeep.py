"""The worker's scheduled upkeep: eviction past retention and decay of retrieval counts, every group (or every
group whose id starts with the section's `groups_prefix`: a store shared with others, or a test on a shared Neo4j).

Runs as one task in the worker's task group, so a stop cancels it with the rest of the worker: it waits on the
stop event between passes and between groups, and a pass already writing one group finishes that group's
transaction (a thread hop is not abandoned half-way). The first pass comes one interval after start, not at
start: a restart loop must not turn into an eviction loop. A failing pass is counted and logged and the next
one runs on schedule; it never takes the worker down. Several workers may run it: eviction finds nothing left
the second time, and a group decays once per interval whoever asks (`Lifecycle.decay_retrievals`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio

from mnemobus.shared.config import Settings
from mnemobus.shared.groups import GroupId
from mnemobus.engine.retention import decay_groups, evict_groups, lifecycle_of, policy_of
from mnemobus.shared.metrics import LifecycleMetrics

log = logging.getLogger("mnemobus.upkeep")


async def scheduled_groups(store: object, prefix: str) -> list[GroupId]:
    """The store's groups a scheduled pass works on: those whose id starts with `prefix` (all when it is '')."""
    return [g for g in await store.group_ids() if g.startswith(prefix)]  # type: ignore[attr-defined]


async def run_upkeep(store: object, settings: Settings, metrics: LifecycleMetrics, stop: anyio.Event) -> None:
    """Evict every `retention.interval_s` and decay every `decay.interval_s` (each when `scheduled`) until `stop`."""
    try:
        lifecycle_of(store)
    except TypeError as exc:
        log.warning("no scheduled upkeep: %s", exc)
        return
    retention, decay = settings.retention, settings.decay

    async def evict() -> None:
        groups = await scheduled_groups(store, retention.groups_prefix)
        await evict_groups(store, groups, policy_of(retention), now=datetime.now(UTC), trigger="schedule",
                           metrics=metrics)

    async def fade() -> None:
        groups = await scheduled_groups(store, decay.groups_prefix)
        await decay_groups(store, groups, decay, now=datetime.now(UTC), metrics=metrics)

    jobs: list[tuple[str, float, Callable[[], Awaitable[None]]]] = []
    if retention.scheduled:
        jobs.append(("evict", retention.interval_s, evict))
    if decay.scheduled:
        jobs.append(("decay", decay.interval_s, fade))
    if not jobs:
        return
    due = {name: time.monotonic() + every for name, every, _ in jobs}
    while not stop.is_set():
        with anyio.move_on_after(max(0.0, min(due.values()) - time.monotonic())):
            await stop.wait()
        if stop.is_set():
            return
        for name, every, job in jobs:
            if time.monotonic() < due[name]:
                continue
            due[name] = time.monotonic() + every
            try:
                await job()
            except Exception as exc:  # noqa: BLE001 - counted and logged; the next pass runs on schedule
                metrics.upkeep_runs.labels(job=name, outcome="error").inc()
                log.warning("scheduled %s failed, next in %.0f s: %s: %s", name, every, type(exc).__name__, exc)
            else:
                metrics.upkeep_runs.labels(job=name, outcome="ok").inc()
