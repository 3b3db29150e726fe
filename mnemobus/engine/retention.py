"""Retention and decay over many groups, and what a history query says once part of its past was evicted.

Shared by the worker's schedule (`mnemobus.kernel.upkeep`) and the on-demand doors (`mnemobus graph evict`, the
`memory.api.evict` endpoint), so a scheduled and a requested eviction remove exactly the same rows and are
counted the same way: a metric per row kind and trigger, and a log line per group that lost anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from mnemobus.shared.config import DecaySettings, RetentionSettings
from mnemobus.shared.groups import GroupId
from mnemobus.shared.metrics import LifecycleMetrics
from mnemobus.store.lifecycle import Eviction, Lifecycle, RetentionPolicy

log = logging.getLogger("mnemobus.retention")


def policy_of(cfg: RetentionSettings) -> RetentionPolicy:
    return RetentionPolicy(ended_days=cfg.ended_days, orphan_days=cfg.orphan_days, entity_cap=cfg.entity_cap)


def lifecycle_of(store: object) -> Lifecycle:
    """The store's life-cycle side; a backend without one cannot evict, decay or keep promoted memories."""
    if not isinstance(store, Lifecycle):
        raise TypeError(f"the {getattr(store, 'name', type(store).__name__)} store has no life-cycle support")
    return store


async def evict_groups(store: object, groups: Sequence[GroupId], policy: RetentionPolicy, *, now: datetime,
                       dry_run: bool = False, trigger: str = "demand",
                       metrics: LifecycleMetrics | None = None) -> dict[GroupId, Eviction]:
    """Each group evicted in its own transaction, one after another; what each lost (or, dry, would lose)."""
    lifecycle = lifecycle_of(store)
    out: dict[GroupId, Eviction] = {}
    for group in groups:
        found = out[group] = await lifecycle.evict(group, policy, now=now, dry_run=dry_run)
        if found.empty:
            continue
        if dry_run:
            log.info("eviction (dry run) of %s would remove %d fact(s) and %d entit(ies)", group, found.facts,
                     found.entities)
            continue
        log.info("evicted from %s (%s): %d fact(s), %d entit(ies); its history before %s is incomplete", group,
                 trigger, found.facts, found.entities, found.cutoff.isoformat() if found.cutoff else "-")
        if metrics is not None:
            metrics.evicted.labels(kind="fact", trigger=trigger).inc(found.facts)
            metrics.evicted.labels(kind="entity", trigger=trigger).inc(found.entities)
    return out


async def decay_groups(store: object, groups: Sequence[GroupId], cfg: DecaySettings, *, now: datetime,
                       metrics: LifecycleMetrics | None = None) -> int:
    """One decay step for every group due one (see `Lifecycle.decay_retrievals`); the facts it lowered."""
    lifecycle = lifecycle_of(store)
    changed = 0
    for group in groups:
        n = await lifecycle.decay_retrievals(group, cfg.factor, min_confidence=cfg.min_confidence, now=now,
                                             every=timedelta(seconds=cfg.interval_s))
        changed += n or 0
    if metrics is not None:
        metrics.decayed.inc(changed)
    if changed:
        log.info("decay: %d fact(s) in %d group(s) faded by %.3f", changed, len(groups), cfg.factor)
    return changed


def cutoff_note(cutoff: datetime | None, as_of: datetime | None) -> str | None:
    """What an answer says when eviction took part of the past it covers; None when it is complete.

    `as_of` None: a history (every version), which is incomplete as soon as anything was evicted."""
    if cutoff is None or (as_of is not None and as_of >= cutoff):
        return None
    return (f"incomplete: facts that ended before {cutoff.isoformat()} were evicted under this group's retention "
            "policy, so this answer may lack what held then")
