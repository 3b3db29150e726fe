"""Event-loop lag: the signal that a plugin process is out of CPU.

Recall runs on the event loop (SQLite, loaded groups) or in worker threads
that compete with it for the interpreter lock and the cores. Past saturation the loop falls behind: a
request waits in the socket before the plugin even sees it, so a recall slot
that is free says nothing about whether there is time to use it. A ticker
that oversleeps does say it, and so does a request that waited past the
threshold for its turn (`MessageContext.queued_s`): recalls on the loop are
short, so the ticker runs between them while the requests behind them wait.
While the loop lags, recall is skipped, the CPU goes to relaying, and every
request still gets a prompt (unenriched) answer.
"""

from __future__ import annotations

import logging
import time

import anyio

log = logging.getLogger("mnemobus.plugin.memory")

TICK_S = 0.05
HOLD_TICKS = 5  # stay shedding this many ticks after the last late one, so recall does not flap every tick
#: a spell in the first seconds after the ticker starts is the process starting (a table loaded, the first poll):
#: shed the same, but said at INFO, not as a warning on every newcomer's first screen (`make run`)
STARTING_S = 5.0


class LoopLag:
    def __init__(self, threshold_ms: float, *, clock=time.monotonic) -> None:  # type: ignore[no-untyped-def]
        self.threshold_s = threshold_ms / 1000
        self.last_lag_s = 0.0
        self._late_at = float("-inf")
        self._due = float("inf")  # when the ticker's next tick should wake (no ticker: never overdue)
        self._clock = clock
        self._watched_from = float("-inf")

    @property
    def enabled(self) -> bool:
        return self.threshold_s > 0

    def record(self, lag_s: float) -> None:
        self.last_lag_s = lag_s
        if self.enabled and lag_s > self.threshold_s:
            if not self._held():  # one line per spell of lag, not one per request shed
                starting = self._clock() - self._watched_from < STARTING_S
                log.log(logging.INFO if starting else logging.WARNING, "event loop %.0f ms behind%s: recall is "
                        "skipped until it catches up", lag_s * 1000, " while the process starts" if starting else "")
            self._late_at = self._clock()

    def _held(self) -> bool:
        return self._clock() - self._late_at < HOLD_TICKS * TICK_S

    def lagging(self, queued_s: float = 0.0) -> bool:
        """Late now, or lately. Now: the ticker's tick is overdue by more than the threshold, or the request
        asking waited longer than it for its turn (`queued_s`, `MessageContext.queued_s`); either is seen before
        the ticker runs again. A recall on the event loop does not yield, so a burst of requests that became
        ready together would otherwise all recall before the ticker could say the loop is behind (the plugin
        bench at 500/s: p50 3.9 s and 1,452 of 10,001 timed out)."""
        if not self.enabled:
            return False
        late = max(self._clock() - self._due, queued_s)
        if late > self.threshold_s:
            self.record(late)
        return self._held()

    async def watch(self) -> None:
        """Tick forever, recording how late each tick woke up."""
        self._watched_from = self._clock()
        while True:
            self._due = self._clock() + TICK_S
            await anyio.sleep(TICK_S)
            self.record(max(0.0, self._clock() - self._due))
