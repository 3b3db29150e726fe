"""A batch the worker holds for its store (the store not answering, or another writer's lock on it).

Why a piece of its own: a hold can last as long as the trouble does (a Neo4j restarting, an erasure rebuilding the
full-text indexes of a million messages, a process hung inside a write), and both holds must show while they last:
the wait is counted as it goes, so an alert on the counter's rate sees a hold in progress rather than after it ends,
and it is said again every SAY_EVERY_S.
"""

from __future__ import annotations

import logging
import time

from mnemobus.shared.metrics import PipelineMetrics

log = logging.getLogger("mnemobus.worker")

SAY_EVERY_S = 60.0  # a line a minute while a hold lasts: enough to see it, too few to flood a log


class StoreHold:
    def __init__(self, metrics: PipelineMetrics, episodes: int, cause: str, until: str) -> None:
        self._metrics, self._episodes, self._cause = metrics, episodes, cause
        self.started = self._counted = self._said = time.monotonic()
        metrics.worker_store_waits.inc()
        log.warning("%s; holding %d episode(s), kept in progress, until %s", cause, episodes, until)

    def tick(self) -> None:
        """Count the wait so far; say it again when SAY_EVERY_S have passed since it was last said."""
        now = time.monotonic()
        self._metrics.worker_store_wait_seconds.inc(now - self._counted)
        self._counted = now
        if now - self._said >= SAY_EVERY_S:
            self._said = now
            log.warning("%s: still holding %d episode(s) after %.0f s", self._cause, self._episodes, now - self.started)

    def end(self) -> float:
        """The whole wait, in seconds, its last part counted."""
        self.tick()
        return self._counted - self.started
