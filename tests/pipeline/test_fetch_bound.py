"""A fetch of `batch` hands out at most `batch` deliveries, on a real nats-server.

nats-py's `fetch(batch)` hands over every delivery already waiting in the subscription's inbox, however many, plus at
least one more from the server. Deliveries wait there when a pull request outlives the fetch that sent it (the client
gave up before the server counted the request's `expires` down). The consumer keeps what is beyond the batch, hands it
out first, keeps it in progress while it waits and gives it back (nak'd, redelivered at once) when its worker stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from mnemobus.bus.connection import Bus
from mnemobus.bus.consumer import Delivery, DurableConsumer, DurableConsumerConfig
from mnemobus.kernel.app import Runtime, open_runtime
from mnemobus.kernel.worker import EpisodeWorker
from mnemobus.shared import subjects
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.store.model import Episode
from tests.pipeline.conftest import wait_for_episodes
from tests.pipeline.test_worker_stop import a_worker as running_worker

pytestmark = pytest.mark.anyio

DURABLE = "fetch-bound-test"


def consumer_on(bus: Bus, *, ack_wait_s: float = 60, kept: list[tuple[str, int]] | None = None) -> DurableConsumer:
    config = DurableConsumerConfig(stream=subjects.EPISODE_STREAM, durable=DURABLE,
                                   filter_subject=f"{subjects.EPISODE_PREFIX}.>", ack_wait_s=ack_wait_s, max_deliver=5,
                                   max_ack_pending=1000, replicas=1)
    observe = (lambda fate, n: kept.append((fate, n))) if kept is not None else None
    return DurableConsumer(bus, config, observe_surplus=observe)


async def publish(bus: Bus, n: int, first: int = 0) -> None:
    for i in range(first, first + n):
        await bus.js_publish(f"{subjects.EPISODE_PREFIX}.user_josh", f"delivery {i}".encode())


async def delivered(bus: Bus, durable: str, n: int) -> None:
    """Once the server has delivered `n` messages not yet acked, and our connection has read them into the inbox."""
    with anyio.fail_after(30):
        while (await bus.js.consumer_info(subjects.EPISODE_STREAM, durable)).num_ack_pending < n:
            await anyio.sleep(0.01)
    await bus.flush()  # the server wrote the deliveries before this round trip's answer


async def pull_request_nobody_reads(bus: Bus, durable: str, inbox: str, batch: int) -> None:
    """A pull request for `batch` on `inbox` whose fetch is gone: what a fetch that gave up before the server
    counted its request's expires down leaves behind. Its deliveries land in the inbox unasked."""
    await bus.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{subjects.EPISODE_STREAM}.{durable}",
                         json.dumps({"batch": batch, "no_wait": True}).encode(), reply=inbox)


def seqs(deliveries: Sequence[Delivery]) -> list[int]:
    return [d._msg.metadata.sequence.stream for d in deliveries]  # noqa: SLF001 - the stream order is the point


async def test_nats_py_fetch_hands_over_every_delivery_in_its_inbox_and_one_more_beyond_the_batch(
        settings: Settings) -> None:
    """The condition, on the client itself: three fetches given up while their pull requests wait on the server
    leave three deliveries in the inbox; fetch(2) then returns those three and one more from the stream."""
    async with open_runtime(settings) as rt:
        await rt.bus.ensure_streams()
        consumer = consumer_on(rt.bus)
        await consumer.declare()
        await consumer.open()
        sub = consumer._sub  # noqa: SLF001 - nats-py's own subscription is what is examined here
        for waiting in range(1, 4):
            fetch = asyncio.ensure_future(sub.fetch(4, timeout=60))
            with anyio.fail_after(30):
                while (await rt.bus.js.consumer_info(subjects.EPISODE_STREAM, DURABLE)).num_waiting < waiting:
                    await anyio.sleep(0.01)
            fetch.cancel()  # the client gives up; the server still holds its pull request
            with pytest.raises(asyncio.CancelledError):
                await fetch
        await publish(rt.bus, 10)  # each waiting request takes what there is for it when it wakes, then ends
        with anyio.fail_after(30):
            while (info := await rt.bus.js.consumer_info(subjects.EPISODE_STREAM, DURABLE)).num_waiting > 0:
                await anyio.sleep(0.01)
        in_inbox = int(info.num_ack_pending)
        await delivered(rt.bus, DURABLE, in_inbox)
        assert in_inbox >= 3
        got = await sub.fetch(2, timeout=5)
        assert seqs([Delivery(m, 1) for m in got]) == list(range(1, in_inbox + 2))
        await consumer.close()


async def with_waiting_in_inbox(rt: Runtime, published: int, waiting: int, fates: list[tuple[str, int]],
                                ack_wait_s: float = 60) -> DurableConsumer:
    """An open consumer, `published` messages on its stream, the first `waiting` of them delivered to its inbox."""
    await rt.bus.ensure_streams()
    consumer = consumer_on(rt.bus, kept=fates, ack_wait_s=ack_wait_s)
    await consumer.declare()
    await consumer.open()
    await publish(rt.bus, published)
    assert consumer.inbox is not None
    await pull_request_nobody_reads(rt.bus, DURABLE, consumer.inbox, waiting)
    await delivered(rt.bus, DURABLE, waiting)
    return consumer


async def test_a_fetch_hands_out_no_more_than_its_batch_and_the_rest_first_next_time(settings: Settings) -> None:
    async with open_runtime(settings) as rt:
        fates: list[tuple[str, int]] = []
        consumer = await with_waiting_in_inbox(rt, 12, 9, fates)
        batches = [await consumer.fetch(4, timeout_s=5) for _ in range(4)]
        # 9 waiting and 1 more from the stream: 4 handed out, 6 kept and handed out first, then the stream again
        assert [seqs(b) for b in batches] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10], [11, 12]]
        assert fates == [("kept", 6)]
        await consumer.close()


async def test_a_closed_consumer_gives_back_what_it_kept_for_redelivery_at_once(settings: Settings) -> None:
    """ack_wait is a minute: the kept deliveries come back within the fetch's 5 s only because they were nak'd."""
    async with open_runtime(settings) as rt:
        fates: list[tuple[str, int]] = []
        first = await with_waiting_in_inbox(rt, 6, 6, fates)
        handed = await first.fetch(2, timeout_s=5)
        for d in handed:
            await d.ack()
        await first.close()
        assert fates == [("kept", 4), ("given_back", 4)]
        second = consumer_on(rt.bus)
        await second.open()
        again = await second.fetch(10, timeout_s=5)
        assert seqs(again) == [3, 4, 5, 6]
        assert [d.attempts for d in again] == [2, 2, 2, 2]
        await second.close()


class Gates:
    """The engine's ingest calls, each held until its gate opens (calls beyond the gates pass): the worker's slots
    stay busy while a test arranges what its next fetch finds."""

    def __init__(self, rt: Runtime, held_calls: int) -> None:
        self.entered = [anyio.Event() for _ in range(held_calls)]
        self.open = [anyio.Event() for _ in range(held_calls)]
        self.sizes: list[int] = []
        ingest_many = rt.engine.ingest_many

        async def gated(episodes: Sequence[Episode]) -> list[object]:
            call = len(self.sizes)
            self.sizes.append(len(episodes))
            if call < len(self.open):
                self.entered[call].set()
                await self.open[call].wait()
            return await ingest_many(episodes)

        rt.engine.ingest_many = gated  # type: ignore[method-assign]


@contextlib.asynccontextmanager
async def a_worker(rt: Runtime, stop: anyio.Event, gates: Gates) -> AsyncIterator[EpisodeWorker]:
    """A worker running until `stop` is set. Leaving the block sets it and opens every gate (a batch in flight is
    finished even while stopping), so a failed check ends the test instead of holding it."""
    async with running_worker(rt, stop) as worker:
        try:
            yield worker
        finally:
            stop.set()
            for gate in gates.open:
                gate.set()


async def entered(gate: anyio.Event) -> None:
    with anyio.fail_after(30):
        await gate.wait()


async def test_deliveries_waiting_in_the_inbox_are_adopted_and_kept_in_progress_until_handed_out(
        settings: Settings) -> None:
    """ack_wait is 1.5 s. Of four deliveries adopted from the inbox, one is taken out and left alone: the server
    delivers it again, to another subscription, once its ack_wait is up; the three still kept are not."""
    async with open_runtime(settings) as rt:
        fates: list[tuple[str, int]] = []
        first = await with_waiting_in_inbox(rt, 4, 4, fates, ack_wait_s=1.5)
        await first.adopt_waiting()
        assert len(first.surplus) == 4 and sum(n for fate, n in fates if fate == "kept") == 4
        left_alone = first.surplus.take(1)
        second = consumer_on(rt.bus, ack_wait_s=1.5)
        await second.open()
        async with anyio.create_task_group() as tg:
            async def keeping() -> None:
                while True:
                    assert await first.surplus.keep_in_progress() == 0
                    await anyio.sleep(0.3)

            tg.start_soon(keeping)
            again = await second.fetch(4, timeout_s=10)  # ends once the one left alone comes back
            tg.cancel_scope.cancel()
        assert seqs(again) == seqs(left_alone) == [1] and again[0].attempts == 2
        kept = await first.fetch(4, timeout_s=5)
        assert seqs(kept) == [2, 3, 4] and [d.attempts for d in kept] == [1, 1, 1]
        await first.close()
        await second.close()


def with_worker(settings: Settings, **worker: object) -> Settings:
    return settings.model_copy(update={"worker": settings.worker.model_copy(update=worker)})


async def publish_episodes(rt: Runtime, ids: range) -> None:
    await rt.bus.ensure_streams()
    for i in ids:
        ep = EpisodeMessage(episode_id=f"bound-{i}", group_id="user_josh", content=f"note number {i}",
                            source_message_id=f"s{i}")
        await rt.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id)


async def twelve_beyond_the_first_batch(rt: Runtime, worker: EpisodeWorker, gates: Gates) -> None:
    """With batch 4 and one slot: while the first batch (one episode) holds the slot, 12 more are delivered to the
    worker's inbox unasked; then the first batch ends and the next fetch brings all 12: 4 are handed out (their
    batch held at the second gate) and 8 kept."""
    await entered(gates.entered[0])  # the one slot is busy: the worker fetches nothing now
    await publish_episodes(rt, range(1, 13))
    assert worker.consumer.inbox is not None
    await pull_request_nobody_reads(rt.bus, subjects.WORKER_DURABLE, worker.consumer.inbox, 12)
    await delivered(rt.bus, subjects.WORKER_DURABLE, 13)
    gates.open[0].set()
    await entered(gates.entered[1])
    assert len(worker.consumer.surplus) == 8


async def test_a_worker_never_works_on_more_than_its_batch_and_kept_episodes_are_not_redelivered(
        settings: Settings) -> None:
    """One slot, busy with a first batch while 12 deliveries come into the inbox: the next fetches hand out 4, 4, 4,
    and the 8 kept while the second batch holds the slot for longer than ack_wait are kept in progress meanwhile
    (the server redelivers nothing); every episode stored once."""
    ack_wait_s = 1.5
    async with open_runtime(with_worker(settings, batch=4, batches_in_flight=1, ack_wait_s=ack_wait_s)) as rt:
        gates = Gates(rt, held_calls=2)
        await publish_episodes(rt, range(1))
        stop = anyio.Event()
        async with a_worker(rt, stop, gates) as worker:
            await twelve_beyond_the_first_batch(rt, worker, gates)
            marks = rt.metrics.worker_in_progress_errors._value.get()
            rounds = 0
            keep_in_progress = worker.consumer.surplus.keep_in_progress

            async def counted() -> int:
                nonlocal rounds
                rounds += 1
                return await keep_in_progress()

            worker.consumer.surplus.keep_in_progress = counted  # type: ignore[method-assign]
            with anyio.fail_after(30):
                while rounds < 4:  # ~4/3 ack_wait with the 8 kept and not yet handed out
                    await anyio.sleep(0.05)
            gates.open[1].set()
            assert await wait_for_episodes(rt, "user_josh", 13) == 13
            stop.set()
        info = await rt.bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
        assert info.num_redelivered == 0 and info.num_ack_pending == 0
        assert rt.metrics.worker_in_progress_errors._value.get() == marks
    assert gates.sizes == [1, 4, 4, 4]
    assert rt.metrics.episodes_stored.labels(created="true")._value.get() == 13
    assert rt.metrics.episodes_stored.labels(created="false")._value.get() == 0


async def test_a_worker_stopped_while_it_keeps_a_surplus_gives_it_back_to_the_next_worker_at_once(
        settings: Settings) -> None:
    """ack_wait is a minute and the next worker stores everything within 30 s: the 8 kept were given back at the
    stop (while the batch in flight was still held), not left to time out. Every episode stored exactly once."""
    async with open_runtime(with_worker(settings, batch=4, batches_in_flight=1, ack_wait_s=60)) as rt:
        gates = Gates(rt, held_calls=2)
        await publish_episodes(rt, range(1))
        first_stop = anyio.Event()
        async with a_worker(rt, first_stop, gates) as worker:
            await twelve_beyond_the_first_batch(rt, worker, gates)
            first_stop.set()
            given_back = rt.metrics.worker_fetch_surplus.labels(fate="given_back")
            with anyio.fail_after(30):
                while given_back._value.get() < 8:  # at the stop, while the batch in flight is still held
                    await anyio.sleep(0.02)
            gates.open[1].set()
        assert await rt.engine.store.count_episodes("user_josh") == 5
        second_stop = anyio.Event()
        async with a_worker(rt, second_stop, gates):
            assert await wait_for_episodes(rt, "user_josh", 13) == 13
            second_stop.set()
    assert gates.sizes[:2] == [1, 4] and max(gates.sizes) <= 4 and sum(gates.sizes) == 13
    assert rt.metrics.episodes_stored.labels(created="true")._value.get() == 13
    assert rt.metrics.episodes_stored.labels(created="false")._value.get() == 0
