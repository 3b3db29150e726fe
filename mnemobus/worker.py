"""The extraction worker: episode stream -> engine -> store, acked only once stored.

Transient trouble (store locked or down) is retried with exponential backoff
and jitter; a message that can never be stored, or that ran out of attempts,
is dead-lettered with its reason and original headers, then acked. No single
message can stop the loop, and a supervisor restarts the loop if it dies.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from datetime import datetime, timezone

import anyio
import nats.errors
from anyio.abc import TaskStatus
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, KeyValueConfig

from mnemobus import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.deadletter import DeadLetterPublisher
from mnemobus.bus.endpoint import parse_message
from mnemobus.config import Settings
from mnemobus.envelope import EpisodeMessage
from mnemobus.errors import InvalidMessage, StoreUnavailable
from mnemobus.groups import InvalidGroupId, validate_group_id
from mnemobus.metrics import PipelineMetrics
from mnemobus.store.model import Episode

log = logging.getLogger("mnemobus.worker")


def to_episode(msg: EpisodeMessage, subject: str) -> Episode:
    """Wire episode to store episode, refusing what must never reach a store."""
    try:
        group = validate_group_id(msg.group_id)
    except InvalidGroupId as exc:
        raise InvalidMessage("invalid_group_id", str(exc)) from exc
    if subject != subjects.episode(group):
        raise InvalidMessage("group_mismatch", f"episode for group {group!r} arrived on subject {subject!r}")
    return Episode(
        id=msg.episode_id, group_id=group, content=msg.content, role=msg.role,
        source_message_id=msg.source_message_id, reference_time=msg.reference_time,
        response=msg.response, agent_id=msg.agent_id, platform=msg.platform, channel_id=msg.channel_id,
    )


def backoff_delay(attempt: int, schedule: list[float]) -> float:
    """Exponential schedule from config, +-25% jitter so retries of a burst don't stampede."""
    base = schedule[min(attempt - 1, len(schedule) - 1)]
    return base * random.uniform(0.75, 1.25)


class EpisodeWorker:
    def __init__(self, bus: Bus, engine, settings: Settings, metrics: PipelineMetrics, *,  # type: ignore[no-untyped-def]
                 instance_id: str, echo: Callable[[str], None] | None = None) -> None:
        self.bus = bus
        self.engine = engine
        self.settings = settings
        self.cfg = settings.worker
        self.metrics = metrics
        self.instance_id = instance_id
        self.echo = echo
        self.dlq = DeadLetterPublisher(bus, metrics)
        self.processed = 0
        self.last_processed_at: datetime | None = None
        self.restarts = 0

    def consumer_config(self) -> ConsumerConfig:
        return ConsumerConfig(
            durable_name=subjects.WORKER_DURABLE,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.cfg.ack_wait_s,
            max_deliver=self.cfg.max_deliver,
            max_ack_pending=max(1000, self.cfg.batch * 4),
            filter_subject=f"{subjects.EPISODE_PREFIX}.>",
        )

    async def setup(self) -> None:
        await self.bus.ensure_streams()
        await self.bus.js.add_consumer(subjects.EPISODE_STREAM, self.consumer_config())

    async def run(self, stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        await self.setup()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat_loop, stop)
            task_status.started()
            await self._supervise(stop)
            tg.cancel_scope.cancel()

    async def _supervise(self, stop: anyio.Event) -> None:
        delay = 0.2
        while not stop.is_set():
            try:
                await self._consume(stop)
                return
            except Exception:
                self.restarts += 1
                self.metrics.worker_restarts.inc()
                log.exception("episode consumer loop crashed; restarting in %.1fs (restart #%d)", delay, self.restarts)
                with anyio.move_on_after(delay):
                    await stop.wait()
                delay = min(delay * 2, 10)

    async def _consume(self, stop: anyio.Event) -> None:
        sub = await self.bus.js.pull_subscribe_bind(durable=subjects.WORKER_DURABLE, stream=subjects.EPISODE_STREAM)
        limiter = anyio.CapacityLimiter(self.cfg.concurrency)
        try:
            while not stop.is_set():
                try:
                    msgs = await sub.fetch(self.cfg.batch, timeout=1.0)
                except (nats.errors.TimeoutError, TimeoutError):
                    continue
                except (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError,
                        nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError) as exc:
                    log.warning("fetch failed while the bus is unavailable (%s); retrying", type(exc).__name__)
                    await anyio.sleep(0.5)
                    continue
                async with anyio.create_task_group() as tg:
                    for m in msgs:
                        tg.start_soon(self._guarded, m, limiter)
        finally:
            try:
                await sub.unsubscribe()
            except Exception:
                pass

    async def _guarded(self, msg: Msg, limiter: anyio.CapacityLimiter) -> None:
        async with limiter:
            try:
                await self.handle(msg)
            except Exception:  # the message stays unacked and comes back after ack_wait
                log.exception("unexpected failure handling episode from %s; it will be redelivered", msg.subject)

    async def handle(self, msg: Msg) -> None:
        attempts = msg.metadata.num_delivered if msg.metadata else 1
        group_hint = msg.subject.removeprefix(f"{subjects.EPISODE_PREFIX}.")
        try:
            wire = parse_message(EpisodeMessage, msg.data, self.settings.nats.max_message_bytes)
            episode = to_episode(wire, msg.subject)  # type: ignore[arg-type]
            started = time.perf_counter()
            outcome = await self.engine.ingest(episode)
            self.metrics.store_seconds.labels(operation="ingest").observe(time.perf_counter() - started)
        except InvalidMessage as exc:
            await self._dead_letter(msg, exc.reason, exc.detail, group_hint, attempts)
            return
        except StoreUnavailable as exc:
            await self._retry_or_give_up(msg, "store_unavailable", str(exc), group_hint, attempts)
            return
        except Exception as exc:
            log.exception("ingest failed unexpectedly for a message on %s", msg.subject)
            await self._retry_or_give_up(msg, "ingest_error", f"{type(exc).__name__}: {exc}", group_hint, attempts)
            return
        await msg.ack_sync(timeout=self.settings.nats.request_timeout_s)
        self.processed += 1
        self.last_processed_at = datetime.now(timezone.utc)
        self.metrics.episodes_stored.labels(created=str(outcome.created).lower()).inc()
        if self.echo:
            self.echo(f"[worker] stored episode {episode.id[:8]} in {episode.group_id}"
                      f" ({outcome.facts_added} new fact(s), {outcome.facts_reinforced} reinforced,"
                      f" {outcome.facts_invalidated} invalidated)" if outcome.created else
                      f"[worker] episode {episode.id[:8]} was already stored; acked the replay")

    async def _retry_or_give_up(self, msg: Msg, reason: str, detail: str, group: str, attempts: int) -> None:
        if attempts >= self.cfg.max_deliver:
            await self._dead_letter(msg, reason, f"gave up after {attempts} attempts: {detail}", group, attempts)
            return
        delay = backoff_delay(attempts, self.cfg.backoff_s)
        self.metrics.worker_retries.labels(reason=reason).inc()
        log.warning("episode on %s not stored (attempt %d/%d): %s; retrying in %.2fs",
                    msg.subject, attempts, self.cfg.max_deliver, detail[:300], delay)
        await msg.nak(delay=delay)

    async def _dead_letter(self, msg: Msg, reason: str, detail: str, group: str, attempts: int) -> None:
        try:
            await self.dlq.send(reason=reason, error=detail, original_subject=msg.subject, data=msg.data,
                                headers=dict(msg.headers or {}), group_id=group, attempts=attempts)
        except Exception as exc:  # could not keep it: leave it in the stream rather than lose it
            log.error("dead letter for %s could not be written (%s); leaving the message for redelivery", msg.subject, exc)
            await msg.nak(delay=backoff_delay(attempts, self.cfg.backoff_s))
            return
        self.metrics.episodes_dead_lettered.labels(reason=reason).inc()
        await msg.ack_sync(timeout=self.settings.nats.request_timeout_s)

    async def _heartbeat_loop(self, stop: anyio.Event) -> None:
        kv = None
        while not stop.is_set():
            try:
                if kv is None:
                    kv = await self.bus.js.create_key_value(KeyValueConfig(bucket=subjects.HEARTBEAT_BUCKET, history=1))
                pending = await self.pending()
                beat = {
                    "role": "worker", "instance": self.instance_id,
                    "beat_at": datetime.now(timezone.utc).isoformat(),
                    "last_processed_at": self.last_processed_at.isoformat() if self.last_processed_at else None,
                    "processed": self.processed, "pending": pending, "restarts": self.restarts,
                }
                await kv.put(subjects.heartbeat_key("worker", self.instance_id), json.dumps(beat).encode())
                await self.bus.publish(subjects.heartbeat("worker"), json.dumps(beat).encode())
            except Exception as exc:
                kv = None
                log.warning("heartbeat failed: %s", exc)
            with anyio.move_on_after(self.settings.worker.heartbeat_s):
                await stop.wait()

    async def pending(self) -> int:
        info = await self.bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
        self.metrics.worker_lag.set(info.num_pending + info.num_ack_pending)
        return int(info.num_pending)
