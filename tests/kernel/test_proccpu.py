"""CPU time as the kernel counts it (shared/proccpu.py): a process's figure with its children's, which is what a
worker costs when its parse child and propagation child do part of its work."""

from __future__ import annotations

import subprocess
import sys
import time

from mnemobus.shared.proccpu import cpu_seconds, tree_cpu_seconds

SPIN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"


def test_a_process_tree_counts_the_cpu_of_the_child_it_started() -> None:
    parent = f"import subprocess, sys, time\nc = subprocess.Popen([sys.executable, '-c', {SPIN!r}])\nc.wait()\ntime.sleep(30)\n"
    proc = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 20
        while tree_cpu_seconds(proc.pid) - cpu_seconds(proc.pid) < 0.35 and time.monotonic() < deadline:
            time.sleep(0.05)  # the child spins, then ends and is reaped: counted all along
        time.sleep(0.3)
        assert tree_cpu_seconds(proc.pid) - cpu_seconds(proc.pid) >= 0.35
        assert cpu_seconds(proc.pid) < 0.35  # the parent itself only waited
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_is_gone_has_no_figure() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert tree_cpu_seconds(proc.pid) != tree_cpu_seconds(proc.pid)  # nan
