"""CPU time as the kernel counts it, for a process (or a thread) and for the whole machine.

Why here: the parse child's `auto` mode (engine/spare_core.py) and the benchmarks read the same counters; the
kernel's are the only figures that tell this process's use of the cores from everyone else's.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int | str = "self", tid: int | None = None) -> float:
    """User plus system CPU time the process (or its thread `tid`) has used so far (Linux /proc; nan when it is
    gone). A thread's own figure tells the event loop's share from the worker threads' (recall's reads)."""
    where = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        fields = Path(where).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime: fields 14 and 15


def tree_cpu_seconds(pid: int) -> float:
    """As `cpu_seconds`, with the process's children, live (read from /proc, their own children too) or ended
    and reaped (the kernel adds those to the parent's cutime and cstime): a worker's parse child and community
    propagation child do part of its work, and a figure without them flatters it. nan when the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    total = sum(int(f) for f in fields[11:15]) / _TICK  # utime, stime, cutime, cstime
    for child in _children(pid):
        used = tree_cpu_seconds(child)
        total += 0.0 if used != used else used  # a child that ended meanwhile is in cutime from the next reading
    return total


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def machine_cpu() -> tuple[float, float] | None:
    """(busy, all) CPU seconds every core of the machine has spent since boot (/proc/stat: busy is all but idle
    and iowait); None off Linux. Between two readings, busy / all * cores is how many cores were in use."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    ticks = [int(x) for x in first[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    return (sum(ticks) - ticks[3] - ticks[4]) / _TICK, sum(ticks) / _TICK
