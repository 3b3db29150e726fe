"""Deliveries a fetch brought beyond the batch it was asked for, kept for the next fetch.

Why: nats-py's pull `fetch(batch)` first empties the subscription's whole queue of delivered messages, however many
it holds, and then asks the server for `batch` minus that many, which the server serves as at least one (nats-py
2.16, `_fetch_n`; nats-io/nats.py PR #397, closed unmerged). Deliveries wait in that queue when a pull request
outlives the fetch that sent it: the server counts a request's `expires` from when it receives it, the client its
timeout from before it sends it, so under load or against a slow server a fetch can give up first and the deliveries
the request still brings land in the queue. With `worker.batch` = 32 the worker was handed batches of 33 and 59.

What is kept here was delivered and is unacked: it is kept in progress while held (or the server would deliver it
again to another worker after ack_wait), handed out first, and given back with a nak (redelivered at once) when its
holder stops.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from mnemobus.bus.delivery import Delivery, SettleFailed

log = logging.getLogger("mnemobus.bus.surplus")

#: fates of kept deliveries, as counted: set aside by a fetch; given back (nak'd) at stop; not confirmed given back
#: (the bus was away: the server delivers it again after ack_wait)
FATES = ("kept", "given_back", "give_back_failed")


class Surplus:
    """The deliveries beyond a batch, oldest first. `observe(fate, n)` is told of each change (a metric)."""

    def __init__(self, observe: Callable[[str, int], None] | None = None) -> None:
        self._held: deque[Delivery] = deque()
        self._observe = observe or (lambda fate, n: None)

    def __len__(self) -> int:
        return len(self._held)

    def bound(self, deliveries: list[Delivery], batch: int) -> list[Delivery]:
        """The first `batch` of `deliveries`; the rest kept, to be handed out by `take` before anything fetched."""
        if len(deliveries) > batch:
            log.debug("a fetch of %d brought %d delivery(ies); the rest kept for the next", batch, len(deliveries))
        self.keep(deliveries[batch:])
        return deliveries[:batch]

    def keep(self, deliveries: list[Delivery]) -> None:
        """Hold `deliveries` after those already held."""
        if deliveries:
            self._held.extend(deliveries)
            self._observe("kept", len(deliveries))

    def take(self, batch: int) -> list[Delivery]:
        """Up to `batch` kept deliveries, oldest first (no network: a caller being stopped cannot lose them)."""
        return [self._held.popleft() for _ in range(min(batch, len(self._held)))]

    async def keep_in_progress(self) -> int:
        """Restart the ack_wait clock of every kept delivery; the number the bus did not confirm."""
        failed = 0
        for delivery in list(self._held):
            try:
                await delivery.in_progress()
            except SettleFailed:
                failed += 1
        return failed

    async def give_back(self) -> int:
        """Nak every kept delivery for redelivery at once (to this or another worker); the number given back."""
        given = failed = 0
        while self._held:
            delivery = self._held.popleft()
            try:
                await delivery.nak(0)
                given += 1
            except SettleFailed as exc:
                failed += 1
                log.warning("a kept delivery from %s was not given back (%s); it is redelivered after ack_wait",
                            delivery.subject, exc.kind)
        if given:
            self._observe("given_back", given)
        if failed:
            self._observe("give_back_failed", failed)
        return given
