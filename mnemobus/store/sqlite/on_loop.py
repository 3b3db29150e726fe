"""A recall's reads on the calling event loop, when nothing in them can hold the loop up (issue 36).

Why: a worker-thread hop per recall cost ~0.5 ms of CPU an enriched request beyond the reads themselves
(`profile_request.py plugin`, five alternated pairs, medians 3.89 -> 3.40 ms; docs/performance.md). The reads of loaded groups
are short CPU work that holds the GIL anyway, so the thread bought little overlap. What a thread is still for is
waiting: a group read from the file for the first time, a lock another thread holds while it loads a group, a file
another connection keeps busy. A read on the loop that would wait for any of these calls `stall` instead; the run
is dropped (reads only: nothing to undo) and made again on a worker thread, where waiting holds up no one else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NoReturn, TypeVar

T = TypeVar("T")

#: new rows a group's vectors, or changed rows its fact graph, may read on the loop before the run goes to a
#: thread: a top-up of a few batches is a few hundred microseconds, a catch-up after a bulk import is not
MAX_NEW_ROWS = 2048

#: why a run left the loop (`mnemobus_store_reads_off_loop_total{reason}`)
REASONS = ("cold", "grown", "busy")

_state = threading.local()


class Stalled(Exception):
    """A read on the loop would have waited: the run goes to a worker thread."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def active() -> bool:
    """True inside an on-loop run on this thread: a read must not wait here."""
    return getattr(_state, "on", False)


def stall(reason: str) -> NoReturn:
    """Leave the loop: remembered here too, so a work that catches every exception cannot keep the run going."""
    _state.stalled = reason
    raise Stalled(reason)


def catch_up(rows: int) -> None:
    """Inside an on-loop run: a group's in-memory copy is `rows` rows behind the file; past MAX_NEW_ROWS reading
    them would hold the loop, so the run leaves it (`grown`)."""
    if rows > MAX_NEW_ROWS:
        stall("grown")


def attempt(run: Callable[[], T]) -> tuple[bool, T | str]:
    """`(True, result)` when `run` finished on this thread without a stall, else `(False, reason)`."""
    _state.on, _state.stalled = True, None
    try:
        result = run()
    except Stalled as exc:
        return False, exc.reason
    finally:
        _state.on = False
    stalled: str | None = _state.stalled
    return (False, stalled) if stalled is not None else (True, result)


class held:
    """`with held(lock)`: as `with lock`, except that on the loop the lock is taken only when it is free (its
    holder may be loading a whole group). A class, not a generator: it runs a dozen times a recall."""

    __slots__ = ("lock",)

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        if not self.lock.acquire(blocking=not active()):
            stall("busy")

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
