"""A circuit breaker for recall: when memory keeps failing, stop asking for a while.

Each failed recall costs a request up to the whole deadline; after a run of
failures the breaker opens and requests go on unenriched at once, then one
request probes again after the cool-down.
"""

from __future__ import annotations

import time


class RecallBreaker:
    def __init__(self, failures_to_open: int = 5, cooldown_s: float = 10.0) -> None:
        self.failures_to_open = failures_to_open
        self.cooldown_s = cooldown_s
        self._failures = 0
        self._opened_at: float | None = None

    def allow(self, now: float | None = None) -> bool:
        if self._opened_at is None:
            return True
        now = time.monotonic() if now is None else now
        if now - self._opened_at >= self.cooldown_s:
            self._opened_at = now  # half-open: let this one through; its result decides
            return True
        return False

    def record(self, ok: bool, now: float | None = None) -> None:
        if ok:
            self._failures = 0
            self._opened_at = None
            return
        self._failures += 1
        if self._failures >= self.failures_to_open:
            self._opened_at = time.monotonic() if now is None else now

    @property
    def open(self) -> bool:
        return self._opened_at is not None
