"""Recall's share of a plugin process's time: past it, requests go on unenriched.

Why: recall is CPU work (on SQLite ~5 ms a request for two 10k-fact groups) and
relaying is almost none. Offered more than it can recall, a plugin process that
admits recalls by free slots alone keeps its recall threads busy on every core it
can get; nats-server, the executors and the plugins' own event loops then starve,
and requests time out instead of going on unenriched (pipeline bench, 500/s on
2 cores: 7,129 of 9,999 timed out). A budget of recall seconds per second leaves
the rest of the machine to relaying, whatever else runs on it.

Time is measured as the recall's wall time: under contention it grows past its
CPU time, which makes the budget tighter exactly when the machine is contended.

A recall with no other request in the process is never skipped:
it delays no one but its own request, which its deadline already bounds, so
skipping it would only take memory from a single user's quick succession of
messages (a closed loop spends ~70% of its time recalling) with nothing gained.
Its time still counts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("mnemobus.plugin.memory")


class RecallBudget:
    """A token bucket of recall seconds: `share` seconds accrue per second, up to one second's worth."""

    def __init__(self, share: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.share = share
        self._clock = clock
        self._tokens = share
        self._at = clock()
        self._spent_out = False

    @property
    def enabled(self) -> bool:
        return self.share > 0

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.share, self._tokens + (now - self._at) * self.share)
        self._at = now

    def allow(self, *, alone: bool = False) -> bool:
        """Whether a recall may start now (always when `alone`: no other request in this process); logs once
        when the budget runs out, and once when it is back."""
        if not self.enabled or alone:
            return True
        self._refill()
        ok = self._tokens > 0
        if ok == self._spent_out:  # a change of state
            self._spent_out = not ok
            if ok:
                log.info("recall budget available again")
            else:
                log.warning("recall used its %.0f%% share of this process's time: recall is skipped until it "
                            "accrues again", self.share * 100)
        return ok

    def spend(self, seconds: float) -> None:
        if self.enabled:
            self._refill()
            self._tokens -= seconds  # may go below zero: a long recall is paid back before the next one
