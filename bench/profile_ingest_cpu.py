"""What ingestion of a real conversation costs in this process's CPU (every thread), and how many mention links
it makes: for telling a change to the write path (issue 37's mention backfill) from main when the machine's load
makes episodes/s useless (CPU seconds move little with load; wall time moves several fold).

Usage: `.venv/bin/python bench/profile_ingest_cpu.py` from a checkout's root, alternated with the other checkout
(e.g. `git archive main | tar -x -C /tmp/main` with `data/` linked): LoCoMo dev conversation 0 through
MemoryEngine on SQLite, the static embedder, batches of 16 (the first batch warms the parser and is not timed).
With NEO4J_URI set, on that Neo4j instead (a fresh group each run), counting the write transactions' round trips
(a Neo4j write's cost is mostly those; this process's CPU is not the server's).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import DEFAULT_PATH, load_conversations  # noqa: E402
from common import print_table  # noqa: E402

BATCH = 16


async def main() -> None:
    from mnemobus.engine import MemoryEngine
    from mnemobus.engine.embedders import make_embedder
    from mnemobus.store.model import Episode, episode_id_for
    from mnemobus.store.sqlite import SqliteStore

    conv = load_conversations(Path(os.environ.get("LOCOMO_PATH", DEFAULT_PATH)))[0]
    uri = os.environ.get("NEO4J_URI")
    if uri:
        conv["group"] = f"{conv['group']}_{int(time.time() * 1000)}"
    emb = make_embedder("static", "all-MiniLM-L6-v2-int8", Path("data/embeddings"))
    emb.embed(["warm up"])
    episodes = [Episode(id=episode_id_for(conv["group"], dia, "user"), group_id=conv["group"], content=text,
                        role="user", source_message_id=dia, reference_time=when, speaker=text.split(":", 1)[0])
                for dia, text, when in conv["turns"]]
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="profile-ingest-") as tmp:
        path = Path(tmp) / "m.sqlite3"
        store = SqliteStore(path) if not uri else neo4j_counting(uri, figures)
        await store.open()
        engine = MemoryEngine(store, embedder=emb)
        await engine.ingest_many(episodes[:BATCH])
        figures["round_trips"] = 0
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(BATCH, len(episodes), BATCH):
            await engine.ingest_many(episodes[i: i + BATCH])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await engine.close()
        if not uri:
            with sqlite3.connect(path) as db:
                figures["mention_links"] = db.execute("SELECT count(*) FROM episode_entities").fetchone()[0]
                figures["entities"] = db.execute("SELECT count(*) FROM entities").fetchone()[0]
            del figures["round_trips"]
    print_table(f"ingestion of LoCoMo conversation 0 ({'neo4j' if uri else 'sqlite'})", {
        "turns_timed": len(episodes) - BATCH, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), **figures,
        "load": round(os.getloadavg()[0], 1)})


def neo4j_counting(uri: str, figures: dict[str, float]) -> Any:
    """A Neo4jStore whose write transactions add their round trips to figures["round_trips"]."""
    from contextlib import asynccontextmanager

    from mnemobus.store.neo4j import Neo4jStore

    store = Neo4jStore(uri)
    real = store._write_txn

    @asynccontextmanager
    async def counting():  # type: ignore[no-untyped-def]
        async with real() as tx:
            try:
                yield tx
            finally:
                figures["round_trips"] = figures.get("round_trips", 0) + tx.round_trips

    store._write_txn = counting  # type: ignore[method-assign]
    return store


if __name__ == "__main__":
    asyncio.run(main())
