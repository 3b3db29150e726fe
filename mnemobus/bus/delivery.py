"""One delivered message of a pull consumer, and what settling it means on the wire (ack, nak, in progress).

Why its own module: the consumer that fetches deliveries and the surplus that keeps the ones beyond a batch
(surplus.py) both settle them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import nats.errors
from nats.aio.msg import Msg


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
