"""The extraction worker: episode stream -> engine -> store, acked only once stored.

A store that stops answering altogether (Neo4j restarting), or whose write lock
another writer holds (an erasure rebuilding the full-text indexes), is waited
out: the batch is held, kept in progress so JetStream does not hand it to
another worker, and stored once the store takes writes again, without spending
a delivery attempt. Other transient trouble is retried with exponential backoff and
jitter; a message that can never be stored, or that ran out of attempts, is
dead-lettered with its reason and original headers, then acked. No single
message can stop the loop, and a supervisor restarts the loop if it dies.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any
from datetime import datetime, timezone

import anyio
from anyio.abc import TaskStatus

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.consumer import Delivery, DurableConsumer, DurableConsumerConfig, FetchFailed, FetchProtocolError, SettleFailed
from mnemobus.bus.deadletter import DeadLetterPublisher
from mnemobus.bus.endpoint import parse_message
from mnemobus.kernel.community_upkeep import CommunityUpkeep
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.shared.errors import InvalidMessage, StoreBusy, StoreCorrupt, StoreUnavailable
from mnemobus.store.erasures import GroupErased
from mnemobus.shared.groups import InvalidGroupId, validate_group_id
from mnemobus.shared.logthrottle import ThrottledLog
from mnemobus.shared.metrics import PipelineMetrics
from mnemobus.kernel.peers import store_identity
from mnemobus.kernel.store_hold import StoreHold
from mnemobus.store.model import Episode, IngestOutcome
from mnemobus.kernel.upkeep import run_upkeep

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
        speaker=msg.speaker_name, name=msg.episode_name,
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
        if self.cfg.batches_in_flight > 1 and hasattr(engine, "overlapping_batches"):
            engine.overlapping_batches()  # its batches overlap: no parse child under `auto` (engine/parse_process.py)
        self.metrics = metrics
        self.instance_id = instance_id
        self.echo = echo
        self.dlq = DeadLetterPublisher(bus, metrics)
        self.consumer = DurableConsumer(bus, self.consumer_config(), observe_surplus=self._surplus)
        self.processed = 0
        self.last_processed_at: datetime | None = None
        self.restarts = 0
        self.retry_log = ThrottledLog(log)  # a store outage retries every pending episode: a line per reason and 10 s
        self._stop = anyio.Event()  # set by run()'s caller: a held batch stops waiting for the store
        self.communities = CommunityUpkeep(engine, settings.communities, settings.extraction, metrics.llm,
                                           metrics.communities)
        if hasattr(engine, "observe_extraction"):
            engine.observe_extraction(self._extracted)

    def _surplus(self, fate: str, deliveries: int) -> None:
        self.metrics.worker_fetch_surplus.labels(fate=fate).inc(deliveries)

    def _extracted(self, extractor: str, episodes: int, seconds: float) -> None:
        self.metrics.extraction_seconds.labels(extractor=extractor).observe(seconds)

    def consumer_config(self) -> DurableConsumerConfig:
        return DurableConsumerConfig(
            stream=subjects.EPISODE_STREAM, durable=subjects.WORKER_DURABLE,
            filter_subject=f"{subjects.EPISODE_PREFIX}.>", ack_wait_s=self.cfg.ack_wait_s,
            max_deliver=self.cfg.max_deliver, max_ack_pending=max(1000, self.cfg.batch * 4),
            replicas=self.settings.nats.streams.replicas,
        )

    async def setup(self) -> None:
        await self.consumer.declare()

    async def run(self, stop: anyio.Event, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._stop = stop
        await self.setup()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat_loop, stop)
            tg.start_soon(run_upkeep, self.engine.store, self.settings, self.metrics.lifecycle, stop)
            tg.start_soon(self.communities.run, stop)
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
                await self._declare_again()
                self.restarts += 1
                self.metrics.worker_restarts.inc()
                log.exception("episode consumer loop crashed; restarting in %.1fs (restart #%d)", delay, self.restarts)
                with anyio.move_on_after(delay):
                    await stop.wait()
                delay = min(delay * 2, 10)

    async def _consume(self, stop: anyio.Event) -> None:
        await self.consumer.open()
        slots = anyio.Semaphore(self.cfg.batches_in_flight)  # the next batch is extracted while the last commits
        try:
            async with anyio.create_task_group() as batches:
                batches.start_soon(self._hold_surplus, stop)
                while not stop.is_set():
                    await slots.acquire()
                    if stop.is_set():  # stopped while every slot was busy: what is kept was given back
                        break
                    deliveries = await self._fetch()
                    if not deliveries:
                        slots.release()
                        continue
                    batches.start_soon(self._work_on, deliveries, slots)
        finally:
            await self.consumer.close()

    async def _hold_surplus(self, stop: anyio.Event) -> None:
        """Deliveries a fetch brought beyond the batch wait for a free slot, which can take longer than ack_wait
        (a slow batch): kept in progress meanwhile, or the server would hand them to another worker too. At stop
        they are given back at once, not after the batches in flight, so another worker can take them."""
        while not stop.is_set():
            with anyio.move_on_after(self.cfg.ack_wait_s / 3):
                await stop.wait()
            if stop.is_set():
                break
            await self.consumer.adopt_waiting()
            if failed := await self.consumer.surplus.keep_in_progress():
                self.metrics.worker_in_progress_errors.inc(failed)
        await self.consumer.surplus.give_back()

    async def _fetch(self) -> list[Delivery]:
        """The next batch, or [] at once when the worker is told to stop: an idle fetch would otherwise hold the
        stop for up to `idle_fetch_s`. A fetch cut short settles nothing, so whatever the server had already
        handed it stays unacked and is redelivered after ack_wait: never acked unstored, never lost."""
        batch: list[Delivery] = []
        async with anyio.create_task_group() as fetching:
            async def cut_short_on_stop() -> None:
                await self._stop.wait()
                fetching.cancel_scope.cancel()

            fetching.start_soon(cut_short_on_stop)
            batch = await self._fetch_or_recover()
            fetching.cancel_scope.cancel()
        return batch

    async def _fetch_or_recover(self) -> list[Delivery]:
        """The next batch; [] after a timeout or a fetch error (counted, then stream and consumer declared again)."""
        try:
            return self._ours(await self.consumer.fetch(self.cfg.batch, timeout_s=self.cfg.idle_fetch_s))
        except FetchProtocolError as exc:
            self._protocol_error("status", str(exc))
            return []
        except FetchFailed as exc:
            self.metrics.worker_fetch_errors.labels(kind=exc.kind).inc()
            self.retry_log.warning("fetch", "fetch failed (%s); declaring stream and consumer again and "
                                   "retrying", exc.kind)
            await anyio.sleep(0.5)
            await self._declare_again()
            return []

    def _ours(self, deliveries: list[Delivery]) -> list[Delivery]:
        """The deliveries of our consumer; anything else on the fetch inbox is a protocol error, counted and
        dropped (it has no ack subject to settle): a stranger that names our inbox as the reply subject of a
        request must not crash the consume loop."""
        ours = [d for d in deliveries if d.is_ours(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)]
        if len(ours) < len(deliveries):
            strangers = [d.subject for d in deliveries if d not in ours]
            self._protocol_error("not_jetstream", f"{len(strangers)} message(s) on {strangers[0]} with no ack "
                                                  "subject of our consumer", len(strangers))
        return ours

    def _protocol_error(self, kind: str, detail: str, count: int = 1) -> None:
        self.metrics.worker_protocol_errors.labels(kind=kind).inc(count)
        self.retry_log.warning(f"protocol-{kind}", "dropped from the fetch inbox, not an episode delivery: %s",
                               detail[:300])

    async def _work_on(self, msgs: list[Delivery], slots: anyio.Semaphore) -> None:
        try:
            with anyio.CancelScope(shield=True):  # a fetched batch is finished even while stopping
                await self.handle_batch(msgs)
        finally:
            slots.release()

    async def _declare_again(self) -> None:
        """A server that came back without its store has neither stream nor consumer: ours to declare again.
        Idempotent when both exist; while the bus is still down it fails and the next fetch error tries again."""
        try:
            await self.setup()
        except Exception as exc:  # noqa: BLE001 - the bus is still away; counted above, retried on the next error
            log.debug("stream and consumer not declared yet: %s", exc)

    async def handle(self, msg: Delivery) -> None:
        await self.handle_batch([msg])

    async def handle_batch(self, msgs: list[Delivery]) -> None:
        """Parse each message, ingest the valid ones in one engine batch, then ack, retry or dead-letter each."""
        ready: list[tuple[Delivery, Episode]] = []
        for msg in msgs:
            try:
                wire = parse_message(EpisodeMessage, msg.data, self.settings.nats.max_message_bytes)
                ready.append((msg, to_episode(wire, msg.subject)))  # type: ignore[arg-type]
            except InvalidMessage as exc:
                await self._guard(self._dead_letter, msg, exc.reason, exc.detail, msg.attempts)
        if not ready:
            return
        started = time.perf_counter()
        with self.communities.ingesting():
            outcomes = await self._ingest(ready)
        held = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, StoreUnavailable)]
        if held and await self._wait_out_store_outage([ready[i][0] for i in held]):
            for i, outcome in zip(held, await self._ingest([ready[i] for i in held]), strict=True):
                outcomes[i] = outcome
        if busy := [i for i, outcome in enumerate(outcomes) if isinstance(outcome, StoreBusy)]:
            await self._wait_out_busy_store(ready, outcomes, busy)
        self._took(len(ready), time.perf_counter() - started)
        for (msg, episode), outcome in zip(ready, outcomes, strict=True):
            await self._guard(self._settle, msg, episode, outcome)
        self.communities.stored([ep for (_, ep), out in zip(ready, outcomes, strict=True)
                            if isinstance(out, IngestOutcome) and out.created and not out.screened])

    def _took(self, episodes: int, seconds: float) -> None:
        """A batch slower than ack_wait is said and counted: otherwise a store answering slowly (a Neo4j just
        started plans every query afresh: 20-38 s for a first batch under load) shows as workers saying nothing."""
        self.metrics.store_seconds.labels(operation="ingest_batch").observe(seconds)
        if seconds > self.cfg.ack_wait_s:
            self.metrics.worker_slow_batches.inc()
            self.retry_log.warning("slow-batch", "storing a batch of %d episode(s) took %.1f s, longer than ack_wait "
                                   "(%.0f s): the store is answering slowly", episodes, seconds, self.cfg.ack_wait_s)

    async def _ingest(self, ready: list[tuple[Delivery, Episode]]) -> list[Any]:
        """Each episode's outcome from the engine, its message kept in progress meanwhile."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._keep_in_progress, [msg for msg, _ in ready])
            try:
                outcomes: list[Any] = list(await self.engine.ingest_many([ep for _, ep in ready]))
            except Exception as exc:  # the whole batch failed the same way: judge each message on its own
                outcomes = [exc] * len(ready)
            tg.cancel_scope.cancel()
        return outcomes

    async def _store_answers(self) -> bool:
        try:
            with anyio.fail_after(self.settings.nats.request_timeout_s * 2):
                await self.engine.store.ping()
            return True
        except Exception:  # noqa: BLE001 - any failure to answer a trivial query is the outage itself
            return False

    async def _wait_out_store_outage(self, msgs: list[Delivery]) -> bool:
        """True once a store that had stopped answering answers again (the held episodes are then stored
        without spending a delivery attempt); False at once when it answers (the failure was the episodes'
        own: they take the retry path) or when the worker is stopping (they are redelivered later)."""
        if await self._store_answers():
            return False
        back, waited = await self._hold(msgs, "the store is not answering", "it does", self._store_answers)
        log.warning("the store answers again after %.1f s; storing the held episodes" if back else
                    "stopping after %.1f s without the store; the held episodes will be redelivered", waited)
        return back

    async def _wait_out_busy_store(self, ready: list[tuple[Delivery, Episode]], outcomes: list[Any],
                                   busy: list[int]) -> None:
        """Store again, in place, the episodes another writer's lock held back, until it lets go (their outcomes
        are replaced) or the worker stops (they take the retry path). A store whose reads answer is no outage, so
        without this a lock held past the retries (an erasure's index rebuild: ~28 s at a million messages)
        dead-lettered every episode written meanwhile."""

        async def written() -> bool:
            nonlocal busy
            if self._stop.is_set():
                return False
            for i, outcome in zip(busy, await self._ingest([ready[i] for i in busy]), strict=True):
                outcomes[i] = outcome
            busy = [i for i in busy if isinstance(outcomes[i], StoreBusy)]
            return not busy

        done, waited = await self._hold([ready[i][0] for i in busy], "another writer holds the store's write lock",
                                        "it is let go", written)
        log.warning("the store's write lock was let go after %.1f s; the held episodes were written" if done else
                    "stopping after %.1f s with the store's write lock still held; the held episodes will be "
                    "redelivered", waited)

    async def _hold(self, msgs: list[Delivery], cause: str, until: str,
                    done: Callable[[], Awaitable[bool]]) -> tuple[bool, float]:
        """Keep `msgs` in progress and ask `done` at growing intervals until it says so (True) or the worker stops
        (False), the wait counted and said as it goes (store_hold.py); and the whole wait in seconds."""
        hold = StoreHold(self.metrics, len(msgs), cause, until)
        delay, back = 0.2, False
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._keep_in_progress, msgs)
            while not self._stop.is_set():
                with anyio.move_on_after(delay):
                    await self._stop.wait()
                hold.tick()
                if await done():
                    back = True
                    break
                delay = min(delay * 2, 2.0)
            tg.cancel_scope.cancel()
        return back, hold.end()

    async def _keep_in_progress(self, msgs: list[Delivery]) -> None:
        """A batch that takes longer than ack_wait (an LLM extractor at a few seconds an episode) would be
        redelivered while it is still being worked on; telling the server it is in progress resets the clock."""
        while True:
            await anyio.sleep(self.cfg.ack_wait_s / 3)
            for msg in msgs:
                try:
                    await msg.in_progress()
                except Exception as exc:  # noqa: BLE001 - at worst it is redelivered and found already stored
                    self.metrics.worker_in_progress_errors.inc()
                    log.debug("could not mark an episode in progress: %s", exc)

    async def _guard(self, fn: Callable[..., Any], msg: Delivery, *args: Any) -> None:
        try:
            await fn(msg, *args)
        except SettleFailed as exc:  # an outage (a frozen or lost server): expected, one line per 10 s, no trace
            self.metrics.worker_settle_errors.labels(kind=exc.kind).inc()
            self.retry_log.warning(f"settle-{exc.kind}", "the bus did not confirm settling an episode from %s (%s); "
                                   "it will be redelivered and found already stored", msg.subject, exc.kind)
        except Exception:  # the message stays unacked and comes back after ack_wait
            self.metrics.worker_settle_errors.labels(kind="unexpected").inc()
            log.exception("unexpected failure settling an episode from %s; it will be redelivered", msg.subject)

    async def _settle(self, msg: Delivery, episode: Episode, outcome: Any) -> None:
        attempts = msg.attempts
        if isinstance(outcome, InvalidMessage):
            await self._dead_letter(msg, outcome.reason, outcome.detail, attempts)
            return
        if isinstance(outcome, StoreUnavailable):  # a damaged file says so apart: only a repair ends it
            reason = "store_corrupt" if isinstance(outcome, StoreCorrupt) else "store_unavailable"
            await self._retry_or_give_up(msg, reason, str(outcome), attempts)
            return
        if isinstance(outcome, GroupErased):  # erased with its group: storing it on a retry would bring it back
            log.info("episode on %s dropped: %s", msg.subject, outcome)
            self.metrics.episodes_erased.inc()
            await msg.ack()
            return
        if isinstance(outcome, BaseException):
            log.error("ingest failed unexpectedly for an episode on %s: %s: %s", msg.subject, type(outcome).__name__, outcome,
                      exc_info=outcome)
            await self._retry_or_give_up(msg, "ingest_error", f"{type(outcome).__name__}: {outcome}", attempts)
            return
        await msg.ack()
        self.processed += 1
        self.last_processed_at = datetime.now(timezone.utc)
        self.metrics.episodes_stored.labels(created=str(outcome.created).lower()).inc()
        if outcome.created and outcome.extractor:
            self.metrics.extraction_facts.labels(extractor=outcome.extractor).observe(outcome.facts_extracted)
            if outcome.facts_extracted == 0:
                self.metrics.extraction_empty.labels(extractor=outcome.extractor).inc()
        if self.echo and not episode.group_id.startswith("worldstate-"):  # the poller's canaries stay quiet
            self.echo(f"[worker] stored episode {episode.id[:8]} in {episode.group_id}"
                      f" ({outcome.facts_added} new fact(s), {outcome.facts_reinforced} reinforced,"
                      f" {outcome.facts_invalidated} invalidated)" if outcome.created else
                      f"[worker] episode {episode.id[:8]} was already stored; acked the replay")

    async def _retry_or_give_up(self, msg: Delivery, reason: str, detail: str, attempts: int) -> None:
        if attempts >= self.cfg.max_deliver:
            await self._dead_letter(msg, reason, f"gave up after {attempts} attempts: {detail}", attempts)
            return
        delay = backoff_delay(attempts, self.cfg.backoff_s)
        self.metrics.worker_retries.labels(reason=reason).inc()
        self.retry_log.warning(reason, "episode on %s not stored (attempt %d/%d): %s; retrying in %.2fs",
                               msg.subject, attempts, self.cfg.max_deliver, detail[:300], delay)
        await msg.nak(delay)

    async def _dead_letter(self, msg: Delivery, reason: str, detail: str, attempts: int) -> None:
        group = msg.subject.removeprefix(f"{subjects.EPISODE_PREFIX}.")
        try:
            await self.dlq.send(reason=reason, error=detail, original_subject=msg.subject, data=msg.data,
                                headers=msg.headers, group_id=group, attempts=attempts)
        except Exception as exc:  # could not keep it: leave it in the stream rather than lose it
            log.error("dead letter for %s could not be written (%s); leaving the message for redelivery", msg.subject, exc)
            await msg.nak(backoff_delay(attempts, self.cfg.backoff_s))
            return
        self.metrics.episodes_dead_lettered.labels(reason=reason).inc()
        await msg.ack()

    async def _heartbeat_loop(self, stop: anyio.Event) -> None:
        while not stop.is_set():
            try:
                pending = await self.pending()
                beat = json.dumps({
                    "role": "worker", "instance": self.instance_id,
                    "beat_at": datetime.now(timezone.utc).isoformat(),
                    "last_processed_at": self.last_processed_at.isoformat() if self.last_processed_at else None,
                    "processed": self.processed, "pending": pending, "restarts": self.restarts,
                    "store": store_identity(self.settings.store), "every_s": self.settings.worker.heartbeat_s,
                }).encode()
                await self.bus.put_key(subjects.HEARTBEAT_BUCKET, subjects.heartbeat_key("worker", self.instance_id),
                                       beat, replicas=self.settings.nats.streams.replicas)
                await self.bus.publish(subjects.heartbeat("worker"), beat)
            except Exception as exc:  # noqa: BLE001 - the bus is away; the missing beat is what the poller watches
                self.metrics.worker_heartbeat_errors.inc()
                log.warning("heartbeat failed: %s", exc)
            with anyio.move_on_after(self.settings.worker.heartbeat_s):
                await stop.wait()

    async def pending(self) -> int:
        waiting, unacked = await self.consumer.pending()
        self.metrics.worker_lag.set(waiting + unacked)
        return waiting
