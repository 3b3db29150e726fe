"""Probes: each observes one thing and returns plain keys for its domain's data.

A probe reports what it *saw* (a failed search is `searchOk: false`); it
raises only when it could not look at all, and then its domain is marked
unavailable and every goal on that domain becomes unknown. The search probe
goes through `engine.recall`, the path the plugin uses, on a sentinel episode
in a dedicated group, because a health check cannot see a broken index. The
flow canary sends episodes through the bus and the worker and watches them
arrive in the store, because a search probe cannot see a dead worker.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

import anyio

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.errors import BusError, KeyNotFound, NotFound
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.shared.metrics import PipelineMetrics
from mnemobus.store.model import Episode, RecallQuery, episode_id_for
from worldstate.goals import WorldstateConfig

SENTINEL_SOURCE_ID = "worldstate-sentinel"
SENTINEL_TEXT = "worldstate sentinel canary zephyrquartz memory search check"
SENTINEL_QUERY = "zephyrquartz sentinel canary"
MAX_OUTSTANDING_CANARIES = 20


class Probe(Protocol):
    """One observation; `name` labels its metrics and errors."""

    name: str

    async def observe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Domain:
    """A named set of probes whose merged keys form `domains.<name>.data`."""

    name: str
    probes: tuple[Probe, ...]


@dataclass
class ProbeContext:
    """What probes may look at; the poller builds it from the runtime."""

    bus: Bus
    engine: Any
    settings: Settings
    pipeline: PipelineMetrics | None
    config: WorldstateConfig


def sentinel_episode(group: str) -> Episode:
    """The fixed episode the search probe recalls; a fixed id keeps re-seeding idempotent."""
    return Episode(
        id=episode_id_for(group, SENTINEL_SOURCE_ID, "exchange"), group_id=group, content=SENTINEL_TEXT,  # type: ignore[arg-type]
        role="exchange", source_message_id=SENTINEL_SOURCE_ID,
        reference_time=datetime(2026, 1, 1, tzinfo=timezone.utc), agent_id="worldstate",
    )


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


NO_ENGINE = "no memory engine in this process"


# -- memory domain ---------------------------------------------------------------


@dataclass
class StoreHealthProbe:
    """The store answers a ping and a count: what a classic health check sees."""

    ctx: ProbeContext
    name: str = "health"

    async def observe(self) -> dict[str, Any]:
        engine = self.ctx.engine
        if engine is None:
            return {"storeHealthy": False, "storeError": NO_ENGINE}
        started = time.perf_counter()
        try:
            await engine.store.ping()
            count = await engine.store.count_episodes()
        except Exception as exc:
            return {"storeHealthy": False, "storeError": _error_text(exc)}
        return {"storeHealthy": True, "storeLatencyMs": _ms_since(started),
                "episodeCount": count}


@dataclass
class SearchProbe:
    """A real recall for a sentinel episode, through `engine.recall`; slow counts as failed."""

    ctx: ProbeContext
    name: str = "search"

    async def observe(self) -> dict[str, Any]:
        engine = self.ctx.engine
        if engine is None:
            return {"searchOk": False, "searchError": NO_ENGINE}
        sentinel = sentinel_episode(self.ctx.config.canary_group)
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.ctx.config.search_timeout_s):
                if await engine.store.get_episode(sentinel.group_id, sentinel.id) is None:
                    await engine.ingest(sentinel)  # idempotent by id; re-seeds after a wipe
                result = await engine.recall(RecallQuery(text=SENTINEL_QUERY, group_ids=(sentinel.group_id,),
                                                         max_facts=1, max_episodes=3))
        except TimeoutError:
            return {"searchOk": False, "searchError": f"search took longer than {self.ctx.config.search_timeout_s}s"}
        except Exception as exc:
            return {"searchOk": False, "searchError": _error_text(exc)}
        found = any(se.episode.id == sentinel.id for se in result.episodes)
        out: dict[str, Any] = {"searchOk": found, "searchLatencyMs": _ms_since(started)}
        if not found:
            out["searchError"] = "the sentinel episode was not recalled"
        return out


@dataclass
class FlowCanaryProbe:
    """Each poll sends one canary episode through the bus and worker and checks which earlier ones were stored.

    `canaryPendingAgeS` is the age of the oldest canary not yet stored (0 when
    all arrived): it grows without bound when the worker, the stream or the
    store's write path is broken, whatever the heartbeats say.
    """

    ctx: ProbeContext
    name: str = "canary"
    outstanding: dict[str, datetime] = field(default_factory=dict)
    last_round_trip_s: float | None = None
    stored_since_wipe: int = 0

    async def observe(self) -> dict[str, Any]:
        engine = self.ctx.engine
        group = self.ctx.config.canary_flow_group
        now = _now()
        if engine is not None:
            for eid, sent in list(self.outstanding.items()):
                if await engine.store.get_episode(group, eid) is not None:
                    self.last_round_trip_s = (now - sent).total_seconds()
                    del self.outstanding[eid]
                    self.stored_since_wipe += 1
            if not self.outstanding and self.stored_since_wipe >= self.ctx.config.canary_keep:
                await engine.store.delete_group(group)
                self.stored_since_wipe = 0
        older = [sent for sent in self.outstanding.values()]
        if len(self.outstanding) < MAX_OUTSTANDING_CANARIES:  # a dead worker must not make us flood the stream
            source_id = f"canary-{now.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
            eid = episode_id_for(group, source_id, "exchange")
            msg = EpisodeMessage(episode_id=eid, group_id=group, content=f"worldstate flow canary {source_id}",
                                 source_message_id=source_id, agent_id="worldstate", reference_time=now)
            await self.ctx.bus.js_publish(subjects.episode(group), msg.model_dump_json().encode(), msg_id=eid)  # type: ignore[arg-type]
            self.outstanding[eid] = now
        pending_age = max(((now - s).total_seconds() for s in older), default=0.0)
        out: dict[str, Any] = {"canaryPendingAgeS": round(pending_age, 3), "canaryOutstanding": len(older)}
        if self.last_round_trip_s is not None:
            out["canaryRoundTripS"] = round(self.last_round_trip_s, 3)
        return out


@dataclass
class HeartbeatProbe:
    """Worker liveness from the heartbeat KV bucket: a beat older than the limit is a dead worker."""

    ctx: ProbeContext
    name: str = "heartbeat"

    async def observe(self) -> dict[str, Any]:
        max_age = self.ctx.config.heartbeat_max_age(self.ctx.settings.worker.heartbeat_s)
        beats: list[dict[str, Any]] = []
        try:
            kv = await self.ctx.bus.js.key_value(subjects.HEARTBEAT_BUCKET)
            keys = await self.ctx.bus.key_names(subjects.HEARTBEAT_BUCKET)
        except NotFound:  # no worker has ever beaten on this bus
            keys = []
        else:
            for key in keys:
                if not key.startswith("worker."):
                    continue
                try:
                    entry = await kv.get(key)
                except KeyNotFound:
                    continue
                try:
                    beats.append(json.loads(entry.value or b"{}"))
                except ValueError:
                    continue
        now = _now()
        ages = []
        for b in beats:
            try:
                ages.append((now - datetime.fromisoformat(b["beat_at"])).total_seconds())
            except (KeyError, TypeError, ValueError):
                continue
        alive = [a for a in ages if a <= max_age]
        out: dict[str, Any] = {"workerAlive": bool(alive), "workersAlive": len(alive),
                               "workersStale": len(ages) - len(alive), "heartbeatMaxAgeS": max_age}
        if ages:
            out["workerHeartbeatAgeS"] = round(min(ages), 3)
        out["workerRestarts"] = sum(int(b.get("restarts") or 0) for b, a in zip(beats, ages) if a <= max_age)
        return out


@dataclass
class ConsumerLagProbe:
    """Episodes waiting for the worker's durable consumer (not yet delivered, and delivered but unacked)."""

    ctx: ProbeContext
    name: str = "lag"

    async def observe(self) -> dict[str, Any]:
        try:
            info = await self.ctx.bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
        except NotFound:
            # no consumer yet: nothing is being consumed, so lag is not observable (goals -> unknown)
            return {"consumerExists": False}
        pending, ack_pending = int(info.num_pending or 0), int(info.num_ack_pending or 0)
        return {"consumerExists": True, "consumerPending": pending, "consumerAckPending": ack_pending,
                "consumerLag": pending + ack_pending, "consumerRedelivered": int(info.num_redelivered or 0)}


@dataclass
class DeadLetterProbe:
    ctx: ProbeContext
    name: str = "dlq"

    async def observe(self) -> dict[str, Any]:
        try:
            info = await self.ctx.bus.js.stream_info(subjects.DLQ_STREAM)
        except NotFound:
            return {"dlqSize": 0}
        return {"dlqSize": int(info.state.messages)}


def _counter_total(pipeline: PipelineMetrics, name: str, **match: str) -> float:
    """Sum of a counter's `_total` samples whose labels include `match`."""
    total = 0.0
    for metric in pipeline.registry.collect():
        for s in metric.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in match.items()):
                total += s.value
    return total


@dataclass
class RecallStatsProbe:
    """Recall timeouts and the fail-open rate since the previous poll, from this process's pipeline counters.

    Only requests handled in this process are seen; in a split deployment the
    Prometheus rules compute the same rate from the plugin's own series.
    """

    ctx: ProbeContext
    name: str = "recall"
    last: tuple[float, float, float] | None = None

    async def observe(self) -> dict[str, Any]:
        p = self.ctx.pipeline
        if p is None:
            return {}
        now = (_counter_total(p, "mnemobus_requests_total"), _counter_total(p, "mnemobus_recall_fail_open_total"),
               _counter_total(p, "mnemobus_recall_fail_open_total", reason="timeout"))
        before = self.last or (0.0, 0.0, 0.0)
        self.last = now
        requests, fail_open, timeouts = (n - b for n, b in zip(now, before))
        return {"recallRequests": int(requests), "recallTimeouts": int(timeouts), "recallFailOpen": int(fail_open),
                "failOpenRate": round(fail_open / requests, 4) if requests > 0 else 0.0}


# -- bus domain ------------------------------------------------------------------


@dataclass
class ConnectionProbe:
    ctx: ProbeContext
    name: str = "connection"

    async def observe(self) -> dict[str, Any]:
        nc = self.ctx.bus.nc
        if not nc.is_connected:
            return {"connected": False}
        started = time.perf_counter()
        await nc.flush(timeout=max(1, int(self.ctx.config.probe_timeout_s)))
        return {"connected": True, "rttMs": _ms_since(started),
                "server": nc.connected_url.netloc if nc.connected_url else None}


@dataclass
class StreamsProbe:
    """JetStream answers and the episode stream exists with a consumer."""

    ctx: ProbeContext
    name: str = "jetstream"

    async def observe(self) -> dict[str, Any]:
        # JetStream being down is the observation here, not a failure to observe: answer before the probe timeout
        if not self.ctx.bus.nc.is_connected:
            return {"jetstreamOk": False, "jetstreamError": "not connected to NATS"}
        try:
            with anyio.fail_after(self.ctx.config.probe_timeout_s * 0.8):
                info = await self.ctx.bus.js.stream_info(subjects.EPISODE_STREAM)
        except NotFound:
            return {"jetstreamOk": True, "episodeStreamExists": False}
        except (TimeoutError, BusError) as exc:
            return {"jetstreamOk": False, "jetstreamError": _error_text(exc) or "no answer"}
        return {"jetstreamOk": True, "episodeStreamExists": True,
                "episodeStreamMessages": int(info.state.messages), "episodeStreamBytes": int(info.state.bytes),
                "episodeStreamConsumers": int(info.state.consumer_count)}


DomainFactory = Callable[[ProbeContext], Domain]


def memory_domain(ctx: ProbeContext) -> Domain:
    return Domain("memory", (StoreHealthProbe(ctx), SearchProbe(ctx), FlowCanaryProbe(ctx), HeartbeatProbe(ctx),
                             ConsumerLagProbe(ctx), DeadLetterProbe(ctx), RecallStatsProbe(ctx)))


def bus_domain(ctx: ProbeContext) -> Domain:
    return Domain("bus", (ConnectionProbe(ctx), StreamsProbe(ctx)))


BUILTIN_DOMAINS: tuple[DomainFactory, ...] = (memory_domain, bus_domain)


async def observe_domain(domain: Domain, timeout_s: float,
                         on_probe: Callable[[str, str, float, str | None], Awaitable[None] | None] | None = None,
                         ) -> dict[str, Any]:
    """Run a domain's probes concurrently, each under its own timeout; one document section back."""
    data: dict[str, Any] = {}
    errors: dict[str, str] = {}
    latency: dict[str, float] = {}

    async def one(probe: Probe) -> None:
        started = time.perf_counter()
        failure: str | None = None
        try:
            with anyio.fail_after(timeout_s):
                data.update(await probe.observe())
        except TimeoutError:
            failure, errors[probe.name] = "timeout", f"no answer within {timeout_s}s"
        except Exception as exc:
            failure, errors[probe.name] = "error", _error_text(exc)
        elapsed = time.perf_counter() - started
        latency[probe.name] = round(elapsed * 1000, 3)
        if on_probe is not None:
            maybe = on_probe(domain.name, probe.name, elapsed, failure)
            if maybe is not None:
                await maybe

    async with anyio.create_task_group() as tg:
        for probe in domain.probes:
            tg.start_soon(one, probe)
    return {"_available": not errors, "collectedAt": _now().isoformat(), "data": dict(sorted(data.items())),
            "errors": errors, "probeLatencyMs": dict(sorted(latency.items()))}
