"""The meter behind `parse_child: auto` (engine/spare_core.py), on the machine's own counters: other processes'
busy cores leave none free for us, while our own child's use counts as ours to share."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from mnemobus.engine.spare_core import MIN_WINDOW_S, SpareCoreMeter, cores_usable

BURN = "while True: pass"


@pytest.fixture
def burners(request: pytest.FixtureRequest) -> Iterator[list[subprocess.Popen[bytes]]]:
    count, nice = request.param  # niced: it takes only the CPU nothing else wants, yet keeps an idle core busy
    procs = [subprocess.Popen([sys.executable, "-c", f"import os\nos.nice({nice})\n{BURN}"]) for _ in range(count)]
    time.sleep(0.3)  # started and spinning
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.parametrize("burners", [(cores_usable(), 19)], indirect=True)
def test_other_processes_keeping_every_core_busy_leave_no_core_free(burners: list[subprocess.Popen[bytes]]) -> None:
    meter = SpareCoreMeter()
    time.sleep(MIN_WINDOW_S + 0.1)
    free = meter.spare()
    assert free is not None and free < 0.5
    assert not SpareCoreMeter().core_free()  # no window read yet: one process, the safe side


@pytest.mark.parametrize("burners", [(1, 0)], indirect=True)  # not niced: its share must be measurable
def test_the_cpu_our_own_child_uses_counts_as_free_for_us(burners: list[subprocess.Popen[bytes]]) -> None:
    ours, theirs = SpareCoreMeter(own=lambda: [burners[0].pid]), SpareCoreMeter()
    time.sleep(MIN_WINDOW_S + 0.1)
    with_child, without = ours.spare(), theirs.spare()
    assert with_child is not None and without is not None
    assert with_child - without > 0.2  # the burner's share of a core, even with two more busy processes
    assert ours.spare() is None  # a window too short to tell


def test_the_cpu_this_process_uses_is_not_counted_as_free_for_the_child() -> None:
    meter = SpareCoreMeter()
    until = time.monotonic() + MIN_WINDOW_S + 0.1
    while time.monotonic() < until:  # this process keeps a core: the child could only take it from us
        pass
    free = meter.spare()
    assert free is not None and free <= cores_usable() - 0.8
