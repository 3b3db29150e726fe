"""The request-path profile's measuring tools (issue 36): a figure they give is only worth quoting if they read
what they say they read, so each is checked against a workload whose answer is known."""

from __future__ import annotations

import os
import sqlite3
import threading
import time

from bench.common import cpu_seconds
from bench.profile_request import _TimedConnection


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_threads_cpu_is_read_apart_from_its_process() -> None:
    """The plugin profile splits an enriched request's CPU between the event loop's thread and the recall's
    worker thread; that split is only true if a thread's figure holds its own CPU and not its siblings'."""
    pid = os.getpid()
    ready, go, spun, read = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    tid: list[int] = []

    def busy() -> None:
        tid.append(threading.get_native_id())
        ready.set()
        go.wait()
        _spin(0.5)
        spun.set()
        read.wait()  # a thread that has ended has no figure: it stays until it has been read

    worker = threading.Thread(target=busy)
    worker.start()
    ready.wait()
    main_before, worker_before = cpu_seconds(pid, threading.get_native_id()), cpu_seconds(pid, tid[0])
    go.set()
    spun.wait()  # the main thread sleeps meanwhile
    worker_spent = cpu_seconds(pid, tid[0]) - worker_before
    main_spent = cpu_seconds(pid, threading.get_native_id()) - main_before
    read.set()
    worker.join()
    assert worker_spent >= 0.4  # clock ticks are 10 ms: well inside
    assert main_spent < 0.2


def test_timed_connection_counts_each_statement_with_its_rows_and_returns_them() -> None:
    """`profile_request.py sql` reads a recall's statements through this wrapper: the store must get the same
    rows back, and each statement's count and rows must land under its own text."""
    spent: dict[str, float] = {}
    count: dict[str, int] = {}
    rows: dict[str, int] = {}
    conn = _TimedConnection(sqlite3.connect(":memory:"), spent, count, rows)
    conn.execute("CREATE TABLE t(x)")
    for i in range(5):
        conn.execute("INSERT INTO t VALUES (?)", (i,))
    assert conn.execute("SELECT x FROM t WHERE x >= ? ORDER BY x", (3,)).fetchall() == [(3,), (4,)]
    assert [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")] == [0, 1, 2, 3, 4]
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (5,)
    assert count["INSERT INTO t VALUES (?)"] == 5
    assert rows["SELECT x FROM t WHERE x >= ? ORDER BY x"] == 2
    assert rows["SELECT x FROM t ORDER BY x"] == 5
    assert all(v >= 0 for v in spent.values()) and set(spent) == set(count) == set(rows)
