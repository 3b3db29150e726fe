"""Whether the machine has a core to spare for the parse child (`extraction.parse_child: auto`).

Why: the child moves most of a batch's parse to a second core, so on a quiet machine the batch door is ~10% faster,
but the two processes spend ~20% more CPU in all, so where the cores are taken it loses, by up to 4x in the runs of
issue 36 (docs/performance.md, "Offline ingestion on two cores"). The load average cannot tell the two cases apart:
it counts this process and its child too. So the meter reads the kernel's counters over the time since its last
reading: the core free for the child is the machine's idle time (/proc/stat) plus what the child itself used
(/proc/<pid>/stat), per second of wall time. Not this process's own use: a core its own threads keep busy (the
local embedder's ONNX runs on several) is not one the child could have without taking it from them. Where others
want the cores, the scheduler shares them out by thread, so neither idle time nor the child's share is left, and
one process is chosen; the choice flips back once the others' use has dropped, whichever way ran the batch before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mnemobus.shared.proccpu import cpu_seconds, machine_cpu

#: a core's share free for the child at or above which it is used: on a quiet 2-core machine ~0.9 is idle beside
#: one process and the child then runs ~0.5-0.6 of a core with ~0.5 still idle; with one other busy thread the idle
#: time is ~0 and the child gets less than half a core, where the pair is slower than one process (issue 36's runs)
NEEDED = 0.6
#: a reading over less wall time than this keeps the last answer: /proc's counters move in 10 ms ticks
MIN_WINDOW_S = 0.5


def cores_usable() -> int:
    """The cores this process may run on (its affinity), which bounds what it can use however idle the machine."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass
class SpareCoreMeter:
    """The cores free for `own()`'s processes (the child), measured between two calls of `spare`."""

    own: Callable[[], Iterable[int]] = field(default=lambda: ())
    needed: float = NEEDED
    _at: float = 0.0
    _idle: float = 0.0
    _ours: dict[int, float] = field(default_factory=dict)
    _last: bool = False

    def __post_init__(self) -> None:
        self._read()

    def spare(self) -> float | None:
        """Cores free for the child since the last reading (idle ones plus what it used), capped at our affinity;
        None when the counters cannot be read (not Linux) or the window is too short to tell."""
        at, idle, ours = self._at, self._idle, self._ours
        if time.monotonic() - at < MIN_WINDOW_S:
            return None
        if not self._read():
            return None
        used = sum(cpu - ours.get(pid, 0.0) for pid, cpu in self._ours.items())  # a new child counted from 0
        # never below 0: on a busy VM the idle and iowait counters may step back a tick between two readings
        return min(float(cores_usable()), max(0.0, (self._idle - idle + used) / (self._at - at)))

    def core_free(self) -> bool:
        """Whether two processes would be faster than one now: the last answer kept while the window is short;
        False off Linux, where nothing can be measured."""
        free = self.spare()
        if free is not None:
            self._last = free >= self.needed
        return self._last

    def _read(self) -> bool:
        machine = machine_cpu()
        if machine is None:
            return False
        busy, total = machine
        ours = {pid: cpu_seconds(pid) for pid in self.own()}
        self._at, self._idle = time.monotonic(), total - busy
        self._ours = {pid: cpu for pid, cpu in ours.items() if cpu == cpu}  # nan: the process is gone
        return True
