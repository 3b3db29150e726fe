"""A durable JetStream pull consumer, as the worker needs one: batches of deliveries it settles one by one.

Why here: the worker decides what to do with an episode (store, retry, dead-letter); how a batch is fetched,
how a server that lost its streams is told about them again, and what ack, nak and in-progress mean on the wire
are the bus's business. The worker imports no NATS client.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from mnemobus.bus.connection import Bus

log = logging.getLogger("mnemobus.bus.consumer")

#: fetch failures that mean the bus or its stream is away for now: the consumer is declared again and fetching goes on
FETCH_OUTAGES = (nats.errors.ConnectionClosedError, nats.errors.ConnectionReconnectingError,
                 nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError, nats.js.errors.NotFoundError)


class FetchFailed(Exception):
    """The bus could not deliver a batch (`kind` names the client's failure); worth declaring and trying again."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class SettleFailed(Exception):
    """The bus did not confirm an ack, nak or in-progress mark (`kind` names the client's failure): the server
    keeps the message and delivers it again after ack_wait, where it is found already stored."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@contextlib.contextmanager
def _settling() -> Iterator[None]:
    try:
        yield
    except (nats.errors.Error, TimeoutError, ConnectionError) as exc:
        raise SettleFailed(type(exc).__name__) from exc


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


class Delivery:
    """One message of a fetched batch: what it says, how often it came, and how to settle it."""

    def __init__(self, msg: Msg, timeout_s: float) -> None:
        self._msg = msg
        self._timeout_s = timeout_s

    @property
    def subject(self) -> str:
        return self._msg.subject

    @property
    def data(self) -> bytes:
        return self._msg.data

    @property
    def headers(self) -> dict[str, str]:
        return dict(self._msg.headers or {})

    def is_ours(self, stream: str, durable: str) -> bool:
        """A delivery of `durable` on `stream`: its reply is that consumer's `$JS.ACK` subject. Anything else on
        the fetch inbox was put there by someone else (a reply to a request that named our inbox)."""
        try:
            meta = self._msg.metadata
        except nats.errors.NotJSMessageError:
            return False
        return meta.stream == stream and meta.consumer == durable

    @property
    def attempts(self) -> int:
        """This delivery's number: 1 the first time, up to max_deliver."""
        return self._msg.metadata.num_delivered if self._msg.metadata else 1

    async def ack(self) -> None:
        """Done with it, confirmed by the server (a lost ack would bring it back after ack_wait)."""
        with _settling():
            await self._msg.ack_sync(timeout=self._timeout_s)

    async def nak(self, delay_s: float) -> None:
        """Deliver it again after `delay_s`."""
        with _settling():
            await self._msg.nak(delay=delay_s)

    async def in_progress(self) -> None:
        """Still being worked on: restart its ack_wait clock."""
        with _settling():
            await self._msg.in_progress()


class DurableConsumer:
    """The durable pull consumer of one stream, declared (idempotently) before fetching and after every outage."""

    def __init__(self, bus: Bus, config: DurableConsumerConfig) -> None:
        self.bus = bus
        self.config = config
        self._sub: Any = None

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
        sub, self._sub = self._sub, None
        if sub is None:
            return
        try:
            await sub.unsubscribe()
        except nats.errors.Error as exc:  # the connection is already gone: nothing is left to unsubscribe
            log.debug("consumer subscription not closed cleanly: %s", exc)

    async def fetch(self, batch: int, timeout_s: float) -> list[Delivery]:
        """Up to `batch` deliveries; [] when none came within `timeout_s`; FetchFailed when the bus is away;
        FetchProtocolError for a status message no server sends a pull request."""
        if self._sub is None:
            raise RuntimeError("fetch() before open()")
        try:
            msgs = await self._sub.fetch(batch, timeout=timeout_s)
        except (nats.errors.TimeoutError, TimeoutError):
            return []
        except FETCH_OUTAGES as exc:
            raise FetchFailed(type(exc).__name__) from exc
        except nats.js.errors.APIError as exc:  # a status the pull protocol has no use for, e.g. one a stranger sent
            raise FetchProtocolError(f"status {exc.code}: {exc.description}") from exc
        timeout = self.bus.settings.request_timeout_s
        return [Delivery(m, timeout) for m in msgs]

    async def pending(self) -> tuple[int, int]:
        """(not yet delivered, delivered and not yet acked)."""
        info = await self.bus.js.consumer_info(self.config.stream, self.config.durable)
        return int(info.num_pending), int(info.num_ack_pending)
