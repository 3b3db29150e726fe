"""The batch door's SQL alone: record every statement the writer connection runs, then replay them on a fresh file.

Why: the store's share of an episode (~0.5-0.6 ms of SQLite) is too small beside the parse for the batch door's CPU
figure to show a change to it on the shared machine (runs of one tree differ by 10%), and thread CPU inside SQLite
moved by a third between replays of one trace at load 5-9. A replay runs exactly the statements of a real batch
(bench-engine's episodes through `MemoryEngine.ingest_many` in batches of 32, parser extractor, static embedder),
so two variants of the store can be compared on the same work; under `valgrind --tool=callgrind` the instruction
count is the same from run to run whatever the load (`--until-warm` gives the part to take off: start-up, schema,
the warm-up batch).

Usage, from a checkout's root (it imports the checkout it is run from):
  .venv/bin/python bench/profile_store_replay.py record /tmp/trace.pkl [--episodes 600]
  .venv/bin/python bench/profile_store_replay.py replay /tmp/trace.pkl [--setup extra.sql] [--until-warm]
  PYTHONMALLOC=malloc valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
      .venv/bin/python bench/profile_store_replay.py replay /tmp/trace.pkl      # "Collected" = instructions
`--setup` runs a script on the fresh file before the replay (say, `DROP TRIGGER ...` to see what a trigger costs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import mnemobus.store.sqlite.store as sqlite_store  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

WARM = ("warm", "", ())  # in a trace: what comes before it is the warm-up batch
Step = tuple[str, str, Any]  # ("one" | "many" | "warm", sql, parameters)


class _Recording:
    """The writer connection, writing down each statement and its parameters as it runs them."""

    def __init__(self, conn: Any, trace: list[Step]) -> None:
        self._conn, self._trace = conn, trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._trace.append(("one", sql, params))
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, seq: Any) -> Any:
        rows = list(seq)
        self._trace.append(("many", sql, rows))
        return self._conn.executemany(sql, rows)


async def record(out: Path, n: int) -> None:
    from bench_engine import _ingest_episodes
    from bench_extraction import meaning

    from mnemobus.engine import MemoryEngine
    from mnemobus.engine.embedders import make_embedder
    from mnemobus.engine.extract_parse import ParsedExtractor

    trace: list[Step] = []
    writer = sqlite_store.SqliteStore._writer_conn
    sqlite_store.SqliteStore._writer_conn = lambda self: _Recording(writer(self), trace)  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="store-replay-") as tmp:
        store = SqliteStore(Path(tmp) / "m.sqlite3")
        await store.open()
        embedder = make_embedder("static", "all-MiniLM-L6-v2-int8")
        engine = MemoryEngine(store, ParsedExtractor(), embedder=embedder, meaning=meaning())
        await engine.ingest_many(_ingest_episodes(32, "warm"))
        trace.append(WARM)
        episodes = _ingest_episodes(n, "batch32")
        for i in range(0, n, 32):
            await engine.ingest_many(episodes[i:i + 32])
        await engine.close()
    with out.open("wb") as f:
        pickle.dump({"episodes": n, "steps": trace}, f)
    print(f"{len(trace)} statements for {n} episodes -> {out}")


async def replay(path: Path, setup: Path | None, until_warm: bool, top: int) -> None:
    with path.open("rb") as f:
        saved = pickle.load(f)
    n, steps = saved["episodes"], saved["steps"]
    cpu: Counter[str] = Counter()
    count: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="store-replay-") as tmp:
        store = SqliteStore(Path(tmp) / "m.sqlite3")
        await store.open()
        c = store._writer_conn()
        if setup is not None:
            c.executescript(setup.read_text())
        counting = False
        for op, sql, params in steps:
            if op == "warm":
                if until_warm:
                    break
                counting = True
                continue
            started = time.thread_time()
            if op == "one":
                cursor = c.execute(sql, params)
                cursor.fetchall()  # a read runs as it is read
            else:
                c.executemany(sql, params)
            if counting:
                kind = " ".join(sql.split()[:6])
                cpu[kind] += time.thread_time() - started
                count[kind] += 1
        if c.in_transaction:
            c.execute("ROLLBACK")
        await store.close()
    if until_warm:
        print("stopped at the warm-up batch's end")
        return
    print(f"{n} episodes: {1000 * sum(cpu.values()) / n:.3f} ms thread CPU an episode in SQLite, "
          f"{sum(count.values()) / n:.1f} statements an episode, load {os.getloadavg()[0]:.1f}")
    for kind, seconds in cpu.most_common(top):
        print(f"  {1000 * seconds / n:7.3f} ms  {count[kind] / n:5.2f} an episode  {1e6 * seconds / count[kind]:7.1f} us  {kind}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--episodes", type=int, default=600)
    rep = sub.add_parser("replay")
    rep.add_argument("trace", type=Path)
    rep.add_argument("--setup", type=Path)
    rep.add_argument("--until-warm", action="store_true")
    rep.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    if args.command == "record":
        asyncio.run(record(args.out, args.episodes))
    else:
        asyncio.run(replay(args.trace, args.setup, args.until_warm, args.top))


if __name__ == "__main__":
    main()
