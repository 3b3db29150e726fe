"""Warnings that can repeat for every message: at most one line per kind and interval, with a count of the rest.

Why: an overloaded plugin sheds recall for hundreds of requests a second, and a
worker retries every pending episode while its store is down. A line per
occurrence buried every other log line (the pipeline bench at 500 requests/s
wrote hundreds a second) and spent CPU the shedding was meant to save. Each
occurrence is still counted in its metric; the log says it at once the first
time, then once per interval with how many it left out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

DEFAULT_INTERVAL_S = 10.0


class ThrottledLog:
    def __init__(self, logger: logging.Logger, interval_s: float = DEFAULT_INTERVAL_S, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._kinds: dict[str, tuple[float, int]] = {}  # kind -> (when last written, occurrences left out since)
        self._lock = threading.Lock()

    def warning(self, kind: str, msg: str, *args: object) -> None:
        """Write `msg % args` now unless a line of this kind was written within the interval; then only count it."""
        now = self._clock()
        with self._lock:
            last, held = self._kinds.get(kind, (None, 0))
            if last is not None and now - last < self.interval_s:
                self._kinds[kind] = (last, held + 1)
                return
            self._kinds[kind] = (now, 0)
        if held:
            msg = f"{msg} (and {held} more like it in the last {now - last:.0f} s)"  # type: ignore[operator]
        self.logger.warning(msg, *args)
