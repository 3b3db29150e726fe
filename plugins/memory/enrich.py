"""Recall for the request path: every group in parallel, one deadline, never an exception.

The deadline is the whole budget memory may add to a request; when it runs
out, or the store fails, the caller gets status timeout/error and forwards
the request unenriched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import anyio

from mnemobus.engine.promoted import render_with_promoted
from mnemobus.shared.groups import GroupId
from mnemobus.shared.limiters import acquire_at_once
from mnemobus.shared.limits import query_tail
from mnemobus.shared.envelope import MemoryContext
from mnemobus.shared.errors import InvalidMessage, StoreCorrupt
from mnemobus.shared.logthrottle import ThrottledLog
from mnemobus.kernel.plugin import PluginContext
from mnemobus.store.model import RecallQuery, RecallResult
from plugins.memory.breaker import RecallBreaker
from plugins.memory.budget import RecallBudget
from plugins.memory.looplag import LoopLag

log = logging.getLogger("mnemobus.plugin.memory")


@dataclass
class RecallGuards:
    """What a plugin process keeps between requests and recall, one of each per plugin."""

    breaker: RecallBreaker
    slots: anyio.CapacityLimiter
    loop_lag: LoopLag
    budget: RecallBudget
    # shedding and failures can happen for every request: each is counted, and said once per interval
    log: ThrottledLog = field(default_factory=lambda: ThrottledLog(log))
    requests: int = 0  # requests the plugin is handling now, at any step (MemoryPlugin.on_request counts them)


async def recall_for_request(ctx: PluginContext, text: str, groups: tuple[GroupId, ...],
                             guards: RecallGuards, sessions: tuple[str | None, ...] = (),
                             queued_s: float = 0.0) -> MemoryContext:
    breaker, slots, loop_lag, budget = guards.breaker, guards.slots, guards.loop_lag, guards.budget
    engine = ctx.engine
    cfg = ctx.settings.memory
    if engine is None:
        ctx.metrics.fail_open.labels(reason="no_engine").inc()
        return MemoryContext(groups=list(groups), status="error")
    if not breaker.allow():
        ctx.metrics.fail_open.labels(reason="circuit_open").inc()
        return MemoryContext(groups=list(groups), status="circuit_open")
    # no other request in the process: this recall delays no one but its own request. Not "no other recall": on
    # SQLite a recall of loaded groups runs on the event loop (store/sqlite/on_loop.py), so it holds up every
    # request here at any step, and recalls never overlap to say so (the plugin bench at 400/s, sustained:
    # 2,084 of 10,001 timed out with the loop's lag and the budget waived for every recall)
    alone = guards.requests <= 1  # and so no other recall either: only requests recall
    # out of CPU while recalls run (so recall is a cause, not a start-up or a worker's batch on a shared loop):
    # another recall now would only delay this request and every one behind it
    if loop_lag.lagging(queued_s) and not alone:
        ctx.metrics.fail_open.labels(reason="loop_lag").inc()  # logged once per spell, by the monitor
        return MemoryContext(groups=list(groups), status="overloaded")
    if not budget.allow(alone=alone):  # logged when it runs out and when it is back, by the budget
        ctx.metrics.fail_open.labels(reason="recall_budget").inc()
        return MemoryContext(groups=list(groups), status="overloaded")
    result: RecallResult | None = None
    failures: list[str] = []
    corrupt = False  # the store's file is damaged: said under its own reason, since only a repair ends it
    refused: str | None = None
    started = time.perf_counter()
    got_slot = False
    # one engine call for every group: the query is embedded once, the groups are searched one after another.
    # A bounded number run at once: past that the process is saturated, and each extra recall would only
    # slow every request down; waiting for a slot counts against the same deadline.
    queue_full = slots.available_tokens == 0 and slots.statistics().tasks_waiting >= slots.total_tokens
    with anyio.move_on_after(0 if queue_full else cfg.recall_deadline_ms / 1000) as scope:
        # as many may wait as run: a longer queue only adds latency to requests that will time out anyway
        await acquire_at_once(slots)  # a recall on the loop does not yield either: a burst is not skipped for it
        got_slot = True
        ran = time.perf_counter()
        try:
            # what the user promoted comes with every recall, in its reads, under the same deadline (issue 39)
            result = await engine.recall(
                RecallQuery(text=query_tail(text), group_ids=groups, max_facts=cfg.max_facts, max_episodes=cfg.max_episodes,
                            max_items=cfg.max_items,
                            promoted=ctx.settings.promotion.max_items, sessions=sessions))
        except InvalidMessage as exc:  # the request's fault, not the store's: the breaker is left alone
            refused = f"{exc.reason}: {exc.detail}"
        except Exception as exc:  # fail open: the agent still gets its request
            failures.append(f"{type(exc).__name__}: {exc}")
            corrupt = isinstance(exc, StoreCorrupt)
        finally:
            slots.release()
            budget.spend(time.perf_counter() - ran)
    elapsed = time.perf_counter() - started
    latency_ms = elapsed * 1000
    if not got_slot:  # saturated, not broken: the breaker is left alone
        ctx.metrics.fail_open.labels(reason="overloaded").inc()
        guards.log.warning("overloaded", "no recall slot free within %.0f ms (%d in flight); forwarding unenriched",
                           cfg.recall_deadline_ms, cfg.max_concurrent_recalls)
        return MemoryContext(groups=list(groups), status="overloaded", latency_ms=latency_ms)
    ctx.metrics.recall_seconds.observe(elapsed)
    if refused is not None:
        ctx.metrics.fail_open.labels(reason="invalid_query").inc()
        guards.log.warning("invalid_query", "recall refused the request's query, forwarding unenriched: %s", refused)
        return MemoryContext(groups=list(groups), status="skipped", latency_ms=latency_ms)
    breaker.record(ok=not scope.cancelled_caught and not failures)
    if scope.cancelled_caught:
        ctx.metrics.fail_open.labels(reason="timeout").inc()
        guards.log.warning("timeout", "recall for %s exceeded its %.0f ms deadline; forwarding unenriched",
                           list(groups), cfg.recall_deadline_ms)
        return MemoryContext(groups=list(groups), status="timeout", latency_ms=latency_ms)
    if failures:
        reason = "store_corrupt" if corrupt else "error"
        ctx.metrics.fail_open.labels(reason=reason).inc()
        guards.log.warning(reason, "recall failed, forwarding unenriched: %s", "; ".join(failures)[:500])
        return MemoryContext(groups=list(groups), status="error", latency_ms=latency_ms)
    merged = (result if result is not None else RecallResult(groups=groups)).top(cfg.max_items)
    block = render_with_promoted(merged, merged.promoted, cfg.context_budget_chars, ctx.settings.promotion.budget_share)
    return MemoryContext(
        groups=list(groups), block=block, facts=len(merged.facts), episodes=len(merged.episodes),
        status="enriched" if block else "empty", latency_ms=latency_ms,
    )
