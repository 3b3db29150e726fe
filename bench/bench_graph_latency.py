"""What graph recall (issue 37) costs a recall: engine recall p50/p99 with each `memory.recall.graph` mode against
`graph: off`, on one SQLite group of 10k (and 100k) facts whose episodes mention the facts' entities.

Run: `make bench-graph-latency` (or `.venv/bin/python bench/bench_graph_latency.py`); BENCH_SIZES=10k,100k picks
sizes (default 10k: the machine is shared); QUICK=1 asks 200 questions instead of 1000.

The group is bench_engine's (entities from a vocabulary, facts between them, random vectors), plus one episode
per fact, saying the fact's sentence and linked to both its entities: a mention graph whose hubs are as
connected as the fact graph's.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import NOW, RNG, VOCAB, _unit, bulk_load, summary_ms  # noqa: E402
from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.embed import HashEmbedder  # noqa: E402
from mnemobus.engine.recipes import RECIPES  # noqa: E402
from mnemobus.kernel.heap import freeze_long_lived, serving_process  # noqa: E402
from mnemobus.store.model import Episode, RecallQuery  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

SIZES = {"10k": 10_000, "100k": 100_000}
MODES = ("off", "bfs", "activation", "ppr", "ppr_turns")


async def add_mentions(store: SqliteStore, group: str, n: int) -> None:
    facts = await store.get_facts(group, [f"{group}:f{i}" for i in range(n)])
    vectors = _unit(len(facts), 384)
    for start in range(0, len(facts), 5_000):
        async with store.transaction() as tx:
            for i in range(start, min(start + 5_000, len(facts))):
                f = facts[i]
                ep = Episode(id=f"{group}:ep{i}", group_id=group, content=f.fact, role="user",
                             source_message_id=f"m{i}", reference_time=f.valid_at or NOW, channel_id="c")
                await tx.insert_episode(ep, screened=False, embedding=vectors[i])
                await tx.link_episode_entity(group, ep.id, f.subject_id)
                await tx.link_episode_entity(group, ep.id, f.object_id)


async def seconds(call: Awaitable[object]) -> float:
    started = time.perf_counter()
    await call
    return time.perf_counter() - started


async def measure(figures: dict[str, float], label: str, total: int, root: Path) -> None:
    store = SqliteStore(root / f"graph_{label}.sqlite3", vector_cache_mb=512)
    await store.open()
    t = time.perf_counter()
    ((group, names),) = await asyncio.to_thread(bulk_load, store, total, 1)
    await add_mentions(store, group, total)
    figures[f"load_{label}_s"] = round(time.perf_counter() - t, 1)
    queries = [f"what about {RNG.choice(names)} and {RNG.choice(VOCAB)}?" for _ in range(200 if quick() else 1000)]
    for mode in MODES:
        engine = MemoryEngine(store, embedder=HashEmbedder(),
                              recipes={n: replace(r, graph=mode) for n, r in RECIPES.items()})
        for q in queries[:20]:
            await engine.recall(RecallQuery(q, (group,), as_of=NOW))
        store.vectors.wait_for_indexes()  # as bench_engine: the indexed path, not the scan before it is built
        freeze_long_lived("warmed")  # as a serving process does once its groups are warmed (kernel/heap.py)
        s = summary_ms([await seconds(engine.recall(RecallQuery(q, (group,), as_of=NOW, max_facts=10,
                                                                 max_episodes=3))) for q in queries])
        figures[f"recall_{label}_{mode}_p50_ms"] = s["p50_ms"]
        figures[f"recall_{label}_{mode}_p99_ms"] = s["p99_ms"]
        print(f"  {label} {mode}: p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms", flush=True)
    await store.close()


async def main() -> None:
    serving_process()
    figures: dict[str, float] = {}
    sizes = os.environ.get("BENCH_SIZES", "10k").split(",")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        for label in sizes:
            await measure(figures, label, SIZES[label], Path(tmp))
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("graph recall latency (SQLite, embedded, one group)", figures)
    write_results("bench_graph_latency", figures, baseline="graph: off on the same store and queries, same run",
                  merge=True)


if __name__ == "__main__":
    asyncio.run(main())
