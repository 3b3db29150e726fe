"""A durable JetStream pull consumer, as the worker needs one: batches of deliveries it settles one by one.

Why here: the worker decides what to do with an episode (store, retry, dead-letter); how a batch is fetched,
how a server that lost its streams is told about them again, and what ack, nak and in-progress mean on the wire
are the bus's business. The worker imports no NATS client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from mnemobus.bus.connection import Bus
from mnemobus.bus.delivery import Delivery, SettleFailed
from mnemobus.bus.surplus import Surplus

__all__ = ["Delivery", "DurableConsumer", "DurableConsumerConfig", "FetchFailed", "FetchProtocolError", "SettleFailed"]

log = logging.getLogger("mnemobus.bus.consumer")

#: fetch failures that mean the bus or its stream is away for now: the consumer is declared again and fetching goes on
FETCH_OUTAGES = (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError,
                 nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError, nats.js.errors.NotFoundError)


class FetchFailed(Exception):
    """The bus could not deliver a batch (`kind` names the client's failure); worth declaring and trying again."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class FetchProtocolError(Exception):
    """The fetch inbox held a status message the pull protocol does not send: counted, then fetching goes on."""


@dataclass(frozen=True)
class DurableConsumerConfig:
    stream: str
    durable: str
    filter_subject: str
    ack_wait_s: float
    max_deliver: int
    max_ack_pending: int
    replicas: int


class DurableConsumer:
    """The durable pull consumer of one stream, declared (idempotently) before fetching and after every outage."""

    def __init__(self, bus: Bus, config: DurableConsumerConfig, *,
                 observe_surplus: Callable[[str, int], None] | None = None) -> None:
        """`observe_surplus(fate, n)` is told of deliveries kept beyond a batch and of their fate (surplus.FATES)."""
        self.bus = bus
        self.config = config
        self._sub: Any = None
        self.surplus = Surplus(observe_surplus)
        self._fetching = False

    def _server_config(self) -> ConsumerConfig:
        c = self.config
        return ConsumerConfig(durable_name=c.durable, ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
                              ack_wait=c.ack_wait_s, max_deliver=c.max_deliver, max_ack_pending=c.max_ack_pending,
                              filter_subject=c.filter_subject, num_replicas=c.replicas)

    async def declare(self) -> None:
        """Streams and consumer exist afterwards (a server that came back without its store gets them again)."""
        await self.bus.ensure_streams()
        await self.bus.js.add_consumer(self.config.stream, self._server_config())

    async def open(self) -> None:
        self._sub = await self.bus.js.pull_subscribe_bind(durable=self.config.durable, stream=self.config.stream)

    @property
    def inbox(self) -> str | None:
        """The subject fetched messages arrive on (while open): the connection's inbox, only its user may read it."""
        return self._sub._deliver if self._sub is not None else None  # noqa: SLF001 - nats-py names it nowhere else

    async def close(self) -> None:
        """Kept deliveries given back first (redelivered at once), then the subscription ended."""
        if self._sub is not None:
            await self.surplus.give_back()
        sub, self._sub = self._sub, None
        if sub is None:
            return
        try:
            await sub.unsubscribe()
        except nats.errors.Error as exc:  # the connection is already gone: nothing is left to unsubscribe
            log.debug("consumer subscription not closed cleanly: %s", exc)

    async def fetch(self, batch: int, timeout_s: float) -> list[Delivery]:
        """Up to `batch` deliveries, never more; [] when none came within `timeout_s`; FetchFailed when the bus is
        away; FetchProtocolError for a status message no server sends a pull request. Deliveries kept from an
        earlier fetch come first, at once and without asking the server (surplus.py: why a fetch brings more)."""
        if self._sub is None:
            raise RuntimeError("fetch() before open()")
        if self.surplus:
            return self.surplus.take(batch)
        self._fetching = True
        try:
            msgs = await self._sub.fetch(batch, timeout=timeout_s)
        except (nats.errors.TimeoutError, TimeoutError):
            return []
        except FETCH_OUTAGES as exc:
            raise FetchFailed(type(exc).__name__) from exc
        except nats.js.errors.APIError as exc:  # a status the pull protocol has no use for, e.g. one a stranger sent
            raise FetchProtocolError(f"status {exc.code}: {exc.description}") from exc
        finally:
            self._fetching = False
        timeout = self.bus.settings.request_timeout_s
        return self.surplus.bound([Delivery(m, timeout) for m in msgs], batch)

    async def adopt_waiting(self) -> None:
        """Deliveries waiting in the inbox while no fetch reads it (a pull request outlived its fetch while every
        batch slot was busy) join the surplus, so they too are kept in progress; the next fetch hands them out."""
        if self._sub is None:
            return
        inbox = self._sub._sub  # noqa: SLF001 - nats-py's subscription under the pull one: the only way to read it
        timeout = self.bus.settings.request_timeout_s
        while self._sub.pending_msgs > 0 and not self._fetching:
            try:
                msg = await inbox.next_msg(timeout=0.05)  # there at once unless a fetch that began took it first
            except nats.errors.Error:
                return
            if not JetStreamContext.is_status_msg(msg):  # a status ends a pull request nobody waits on any more
                self.surplus.keep([Delivery(msg, timeout)])

    async def pending(self) -> tuple[int, int]:
        """(not yet delivered, delivered and not yet acked)."""
        info = await self.bus.js.consumer_info(self.config.stream, self.config.durable)
        return int(info.num_pending), int(info.num_ack_pending)
