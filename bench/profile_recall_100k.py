"""Where a recall's time goes at 100k facts (issues 36 and 37): the graph-latency bench's store (one SQLite group of
100k facts and 100k turns that mention their entities), built once and kept, then each step of a recall timed.

Run: `.venv/bin/python bench/profile_recall_100k.py build|time|breakdown|pyspy [--mode off|bfs|activation|ppr]
[--n N]`. The store is kept under $BENCH_TMP (default /tmp/mnemobus-recall-100k) with the names its queries draw
from, so repeated runs (and a second checkout, for an alternated A/B) skip the 2-minute load. `time` prints p50/p99
for the mode; `breakdown` the wall time per store read a recall (a read waiting on the page cache shows too) (they all run on one thread, in one snapshot);
`pyspy` records a flame graph of `time` into bench/profiles/.
"""

from __future__ import annotations

import argparse
import asyncio
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["build", "time", "breakdown", "pyspy"])
    ap.add_argument("--mode", default="off", choices=["off", "bfs", "activation", "ppr", "ppr_turns"])
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
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
    else:
        out = Path(__file__).resolve().parent / "profiles" / f"recall_100k_{args.mode}.svg"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        subprocess.run([spy, "record", "-r", "200", "-o", str(out), "--", sys.executable, __file__, "time",
                        "--mode", args.mode, "--n", str(args.n)], check=True)


if __name__ == "__main__":
    main()
