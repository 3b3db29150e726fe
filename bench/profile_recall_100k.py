"""Where a recall's time goes at 100k facts (issues 36 and 37): the graph-latency bench's store (one SQLite group of
100k facts and 100k turns that mention their entities), built once and kept, then each step of a recall timed.

Run: `.venv/bin/python bench/profile_recall_100k.py build|time|breakdown|pyspy [--mode off|bfs|activation|ppr]
[--n N]`. The store is kept under $BENCH_TMP (default /tmp/mnemobus-recall-100k) with the names its queries draw
from, so repeated runs (and a second checkout, for an alternated A/B) skip the 2-minute load. `time` prints p50/p99
for the mode; `breakdown` the wall time per store read a recall (a read waiting on the page cache shows too) (they all run on one thread, in one snapshot);
`pyspy` records a flame graph of `time` into bench/profiles/; `tail` times each step of every recall (wall and CPU,
and the collector's pauses) and compares the slowest 5% of recalls with the median ones: which step grows in the tail.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import RNG, VOCAB, bulk_load  # noqa: E402
from bench_graph_latency import add_mentions  # noqa: E402
from common import summary_ms  # noqa: E402
from profile_request import STORE_STEPS, _timed  # noqa: E402

from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.embed import HashEmbedder  # noqa: E402
from mnemobus.engine.recipes import RECIPES  # noqa: E402
from mnemobus.kernel.heap import freeze_long_lived, serving_process  # noqa: E402
from mnemobus.store.model import RecallQuery  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

ROOT = Path(os.environ.get("BENCH_TMP", "/tmp/mnemobus-recall-100k"))
STORE = ROOT / "graph_100k.sqlite3"
META = ROOT / "graph_100k.json"
TOTAL = 100_000


async def build() -> None:
    ROOT.mkdir(parents=True, exist_ok=True)
    for p in ROOT.glob("graph_100k.*"):
        p.unlink()
    from bench_engine import NOW

    store = SqliteStore(STORE, vector_cache_mb=512)
    await store.open()
    ((group, names),) = await asyncio.to_thread(bulk_load, store, TOTAL, 1)
    await add_mentions(store, group, TOTAL)
    await store.close()
    META.write_text(json.dumps({"group": group, "names": names, "now": NOW.isoformat()}))


async def engine_for(mode: str) -> tuple[SqliteStore, MemoryEngine, str, list[str], datetime]:
    meta = json.loads(META.read_text())
    store = SqliteStore(STORE, vector_cache_mb=512)
    await store.open()
    engine = MemoryEngine(store, embedder=HashEmbedder(),
                          recipes={n: replace(r, graph=mode) for n, r in RECIPES.items()})
    return store, engine, meta["group"], meta["names"], datetime.fromisoformat(meta["now"])


def queries(names: list[str], n: int) -> list[str]:
    return [f"what about {RNG.choice(names)} and {RNG.choice(VOCAB)}?" for _ in range(n)]


async def timed(mode: str, n: int, spent: dict[str, float] | None = None) -> dict[str, float]:
    store, engine, group, names, now = await engine_for(mode)
    qs = queries(names, n)
    for q in qs[:20]:
        await engine.recall(RecallQuery(q, (group,), as_of=now))
    store.vectors.wait_for_indexes()
    freeze_long_lived("warm-up done")  # only with --freeze
    if spent is not None:
        for name in (*STORE_STEPS, "entity_links"):  # entity_links: the graph step's reads
            setattr(store, name, _timed(spent, name, getattr(store, name), time.perf_counter))
    lat = []
    for q in qs:
        t = time.perf_counter()
        await engine.recall(RecallQuery(q, (group,), as_of=now, max_facts=10, max_episodes=3))
        lat.append(time.perf_counter() - t)
    await engine.close()
    return {**summary_ms(lat), "max_ms": round(1000 * max(lat), 3)}


# the steps `tail` times per recall: (module or class, attribute, name shown); store reads and the graph step's parts
def tail_steps(store: SqliteStore) -> list[tuple[object, str, str]]:
    from mnemobus.engine import graph_recall, recall
    from mnemobus.store.fact_graph import FactEdges
    from mnemobus.store.sqlite import store as sqlite_store

    steps: list[tuple[object, str, str]] = [(store, name, name) for name in (*STORE_STEPS, "entity_links", "run_reads")]
    steps += [(graph_recall, f, "graph." + f) for f in ("chosen_seeds", "local_graph", "spread", "pagerank", "by_hops")]
    steps += [(store.graphs, "current", "fact_graph_current"), (store, "_write_counts", "retrieval_counts_written")]
    steps += [(recall, "rrf", "rrf"), (sqlite_store, "newest_mentions", "entity_links.newest_mentions"),
              (FactEdges, "around", "entity_links.around")]
    return steps


def _per_call(now: dict[str, list[float]], name: str, fn):  # type: ignore[no-untyped-def]
    """`fn` with its wall and thread CPU time added to now[name] (the current recall's figures)."""
    import inspect

    def add(w: float, c: float) -> None:
        got = now.setdefault(name, [0.0, 0.0])
        got[0] += time.perf_counter() - w
        got[1] += time.thread_time() - c

    if inspect.iscoroutinefunction(fn):
        async def async_wrapper(*a, **k):  # type: ignore[no-untyped-def]
            w, c = time.perf_counter(), time.thread_time()
            try:
                return await fn(*a, **k)
            finally:
                add(w, c)
        return async_wrapper

    def wrapper(*a, **k):  # type: ignore[no-untyped-def]
        w, c = time.perf_counter(), time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            add(w, c)
    return wrapper


async def tail(mode: str, n: int) -> dict[str, object]:
    """Per recall: wall, process CPU, each step's wall/CPU and the collector's pauses; then the mean of each over the
    median band (45th-55th percentile of wall) and over the slowest 5%."""
    store, engine, group, names, now_at = await engine_for(mode)
    qs = queries(names, n)
    for q in qs[:20]:
        await engine.recall(RecallQuery(q, (group,), as_of=now_at))
    store.vectors.wait_for_indexes()
    freeze_long_lived("warm-up done")  # only with --freeze
    now: dict[str, list[float]] = {}
    for owner, attr, name in [*tail_steps(store), (engine.embedder, "embed", "query_embedding")]:
        fn = getattr(owner, attr, None)
        if fn is not None:
            setattr(owner, attr, _per_call(now, name, fn))
    gc_started: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started.append(time.perf_counter())
        elif gc_started:
            got = now.setdefault(f"gc{info['generation']}", [0.0, 0.0])
            got[0] += time.perf_counter() - gc_started.pop()

    gc.callbacks.append(on_gc)
    rows: list[dict[str, list[float]]] = []
    for q in qs:
        now.clear()
        w, c = time.perf_counter(), time.process_time()
        await engine.recall(RecallQuery(q, (group,), as_of=now_at, max_facts=10, max_episodes=3))
        now["recall"] = [time.perf_counter() - w, time.process_time() - c]
        rows.append({k: list(v) for k, v in now.items()})
    gc.callbacks.remove(on_gc)
    await engine.close()
    rows.sort(key=lambda r: r["recall"][0])
    bands = {"median": rows[int(0.45 * n): int(0.55 * n) + 1], "slowest5": rows[int(0.95 * n):]}
    steps = sorted({k for r in rows for k in r}, key=lambda k: -sum(r.get(k, [0, 0])[0] for r in bands["slowest5"]))
    table = {}
    for step in steps:
        table[step] = {f"{band}_{what}_ms": round(1000 * statistics.fmean(r.get(step, [0.0, 0.0])[i] for r in rs), 3)
                       for band, rs in bands.items() for i, what in ((0, "wall"), (1, "cpu"))}
    slowest = [{k: round(1000 * v[0], 2) for k, v in sorted(r.items(), key=lambda kv: -kv[1][0])[:6]}
               for r in rows[-5:]]
    return {"mode": mode, **summary_ms([r["recall"][0] for r in rows]),
            "cpu_ms_per_recall": round(1000 * statistics.fmean(r["recall"][1] for r in rows), 3), "steps": table,
            "slowest": slowest}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["build", "time", "breakdown", "pyspy", "tail"])
    ap.add_argument("--mode", default="off", choices=["off", "bfs", "activation", "ppr", "ppr_turns"])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--freeze", action="store_true", help="freeze the heap after the warm-up, as a serving process "
                    "does once its indexes are warmed (mnemobus/kernel/heap.py)")
    args = ap.parse_args()
    if args.freeze:
        serving_process()
    if args.what == "build" or not META.exists():
        asyncio.run(build())
        if args.what == "build":
            return
    if args.what == "time":
        print(json.dumps({"mode": args.mode, **asyncio.run(timed(args.mode, args.n))}))
    elif args.what == "breakdown":
        spent: dict[str, float] = {}
        figures = asyncio.run(timed(args.mode, args.n, spent))
        per = {f"us_{k}": round(1e6 * v / args.n, 1) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}
        print(json.dumps({"mode": args.mode, **figures, **per}, indent=1))
    elif args.what == "tail":
        result = asyncio.run(tail(args.mode, args.n))
        steps, slowest = result.pop("steps"), result.pop("slowest")
        print(json.dumps(result))
        print(f"{'step':34} {'median wall':>12} {'cpu':>8} {'slowest5% wall':>15} {'cpu':>8}")
        for step, f in steps.items():  # type: ignore[attr-defined]
            print(f"{step:34} {f['median_wall_ms']:12.3f} {f['median_cpu_ms']:8.3f} {f['slowest5_wall_ms']:15.3f} "
                  f"{f['slowest5_cpu_ms']:8.3f}")
        print("the five slowest recalls, their six longest steps (wall ms):")
        for r in slowest:  # type: ignore[attr-defined]
            print(" ", r)
    else:
        out = Path(__file__).resolve().parent / "profiles" / f"recall_100k_{args.mode}.svg"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        subprocess.run([spy, "record", "-r", "200", "-o", str(out), "--", sys.executable, __file__, "time",
                        "--mode", args.mode, "--n", str(args.n)], check=True)


if __name__ == "__main__":
    main()
