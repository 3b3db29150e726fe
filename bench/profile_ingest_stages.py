"""Where an episode of the batch door spends its CPU, stage by stage, and how many SQL statements it runs.

Why: on the shared 2-core machine a sampling profiler counts a thread waiting for a core as busy, so its shares
move with the load (py-spy gave the extractor's rules 6% of the samples at load 4 and 11% at load 12 on one tree);
the CPU time of the thread inside each stage does not. Each stage below is wrapped to add its thread's CPU time
(a stage inside another is taken off the outer one), and the writer connection counts its statements by kind.

What runs: bench-engine's episodes (`_ingest_episodes`) through `MemoryEngine.ingest_many` in batches of 32, the
parser extractor in this process, the static embedder, SQLite, the relation mapping as configured; the first
batch warms the parser and the relation model and is not counted.

Usage: `.venv/bin/python bench/profile_ingest_stages.py [--episodes 600]` from a checkout's root (also another
checkout's, for an A/B: it imports the checkout it is run from).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_engine import _ingest_episodes  # noqa: E402
from bench_extraction import meaning  # noqa: E402

import mnemobus.store.sqlite.store as sqlite_store  # noqa: E402
from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine import extract_parse, ingest  # noqa: E402
from mnemobus.engine.embedders import make_embedder  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402
from mnemobus.store.sqlite import vectors, writes  # noqa: E402

CPU: Counter[str] = Counter()  # stage -> thread CPU seconds, its inner stages taken off
STATEMENTS: Counter[str] = Counter()  # the first words of each statement on the writer connection
STATEMENT_CPU: Counter[str] = Counter()  # their thread CPU inside SQLite (its callers' stages include it too)
_inside: dict[int, str | None] = {}


def _charge(name: str, started: float) -> None:
    spent = time.thread_time() - started
    CPU[name] += spent
    me = threading.get_ident()
    _inside[me] = outer = _outer.pop((me, name), None)
    if outer:
        CPU[outer] -= spent


_outer: dict[tuple[int, str], str | None] = {}


def _enter(name: str) -> float:
    me = threading.get_ident()
    _outer[(me, name)] = _inside.get(me)
    _inside[me] = name
    return time.thread_time()


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):  # the store's transaction calls: they never suspend inside a batch
        @functools.wraps(fn)
        async def waited(*args: Any, **kwargs: Any) -> Any:
            started = _enter(name)
            try:
                return await fn(*args, **kwargs)
            finally:
                _charge(name, started)
        return waited

    @functools.wraps(fn)
    def called(*args: Any, **kwargs: Any) -> Any:
        started = _enter(name)
        try:
            return fn(*args, **kwargs)
        finally:
            _charge(name, started)
    return called


class _Rows(list):  # type: ignore[type-arg]
    """A SELECT's rows, read inside the timing: iterable and fetchable as the cursor was."""

    def __init__(self, rows: list[Any], cursor: Any) -> None:
        super().__init__(rows)
        self.lastrowid, self.rowcount = cursor.lastrowid, cursor.rowcount

    def fetchone(self) -> Any:
        return self[0] if self else None

    def fetchall(self) -> list[Any]:
        return list(self)


class _Counted:
    """The writer connection, counting statements (the transaction's own statements timed as a stage)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, *args: Any) -> Any:
        words = sql.split()
        kind = " ".join(words[:5])
        STATEMENTS[kind] += 1
        if words[0].upper() in ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK"):
            return timed(f"sql {words[0].upper()}", self._conn.execute)(sql, *args)
        started = time.thread_time()
        cursor = self._conn.execute(sql, *args)
        rows = cursor.fetchall() if words[0].upper() == "SELECT" else None  # the statement runs as it is read
        STATEMENT_CPU[kind] += time.thread_time() - started
        return cursor if rows is None else _Rows(rows, cursor)


def instrument() -> None:
    extract_parse.ParsedExtractor._parse = timed("parse (nlp.pipe, fragments)", extract_parse.ParsedExtractor._parse)
    extract_parse.read_docs = timed("rules (read_docs)", extract_parse.read_docs)
    ingest.canonical_extraction = timed("relation mapping", ingest.canonical_extraction)
    ingest.prefetch_for = timed("prefetch", ingest.prefetch_for)
    sqlite_store.SqliteStore._one_savepoint = timed("store: the work's own code", sqlite_store.SqliteStore._one_savepoint)
    vectors.VectorCache._refresh = timed("store: vector cache refresh", vectors.VectorCache._refresh)
    writes.load_entities = timed("store: load_entities", writes.load_entities)
    for name, method in list(vars(writes.SqliteTxn).items()):
        if inspect.iscoroutinefunction(method) and not name.startswith("_"):
            setattr(writes.SqliteTxn, name, timed(f"store: {name}", method))
    writer = sqlite_store.SqliteStore._writer_conn
    sqlite_store.SqliteStore._writer_conn = lambda self: _Counted(writer(self))  # type: ignore[method-assign]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=600)
    n = ap.parse_args().episodes
    instrument()
    with tempfile.TemporaryDirectory(prefix="ingest-stages-") as tmp:
        store = SqliteStore(Path(tmp) / "m.sqlite3")
        await store.open()
        embedder = make_embedder("static", "all-MiniLM-L6-v2-int8")
        embedder.embed(["warm up"])
        embedder.embed = timed("embed", embedder.embed)  # type: ignore[method-assign]
        engine = MemoryEngine(store, extract_parse.ParsedExtractor(), embedder=embedder, meaning=meaning())
        await engine.ingest_many(_ingest_episodes(32, "warm"))
        CPU.clear()
        STATEMENTS.clear()
        STATEMENT_CPU.clear()
        episodes = _ingest_episodes(n, "batch32")
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(0, n, 32):
            await engine.ingest_many(episodes[i:i + 32])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await engine.close()
    total = 1000 * cpu / n
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"{n} episodes, {n / wall:.1f} episodes/s wall, {total:.3f} ms CPU an episode (process), load {load}")
    for name, seconds in CPU.most_common():
        print(f"  {1000 * seconds / n:7.3f} ms  {name}")
    print(f"  {total - 1000 * sum(CPU.values()) / n:7.3f} ms  the rest (event loop, thread hops, the ingestor's glue)")
    print(f"statements an episode: {sum(STATEMENTS.values()) / n:.1f}")
    print("  an episode   us each   statement")
    for sql, count in STATEMENTS.most_common(25):
        print(f"  {count / n:6.2f}  {1e6 * STATEMENT_CPU[sql] / max(count, 1):8.1f}   {sql}")


if __name__ == "__main__":
    asyncio.run(main())
