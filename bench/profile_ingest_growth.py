"""CPU an episode of the batch door as its groups grow: whether ingestion gets dearer as a conversation gets longer.

Why: a cost that grows with a group's size (a read of a subject's whole chain of facts, issue 36) does not show in
bench-engine's 2,000 episodes in 20 groups, but does in a user's year of chat. This ingests bench-engine's texts
in batches of 32 (one process, static embedder, SQLite) into `--groups` groups and prints this process's CPU an
episode for every `--block` episodes, beside the episodes a group holds by then.

Usage: `.venv/bin/python bench/profile_ingest_growth.py [--episodes 12800] [--groups 20] [--block 640]`, from a
checkout's root (the static embedder's table is read from data/embeddings). It writes no results file.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import NOW, _episode_text  # noqa: E402
from bench_extraction import meaning  # noqa: E402

from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.embedders import make_embedder  # noqa: E402
from mnemobus.engine.extract_parse import ParsedExtractor  # noqa: E402
from mnemobus.shared.groups import GroupId  # noqa: E402
from mnemobus.store.model import Episode, IngestOutcome, episode_id_for  # noqa: E402


def episodes(n: int, groups: int, tag: str) -> list[Episode]:
    names = [GroupId(f"user_{i}") for i in range(groups)]
    return [Episode(id=episode_id_for(names[i % groups], f"{tag}{i}", "user"), group_id=names[i % groups],
                    content=_episode_text(), role="user", source_message_id=f"{tag}{i}",
                    reference_time=NOW - timedelta(minutes=n - i)) for i in range(n)]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=12_800)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--block", type=int, default=640)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ingest-growth-") as tmp:
        from mnemobus.store.sqlite import SqliteStore

        store = SqliteStore(Path(tmp) / "m.sqlite3")
        await store.open()
        engine = MemoryEngine(store, ParsedExtractor(), embedder=make_embedder("static", "all-MiniLM-L6-v2-int8"),
                              meaning=meaning())
        await engine.ingest_many(episodes(32, args.groups, "warm"))  # the parser and the relation model load
        todo = episodes(args.episodes, args.groups, "grow")
        print(f"{'episodes':>9} {'a group':>8} {'ms CPU an episode':>18}")
        cpu, done = time.process_time(), 0
        for i in range(0, len(todo), 32):
            for outcome in await engine.ingest_many(todo[i:i + 32]):
                assert isinstance(outcome, IngestOutcome), outcome
            done = i + 32
            if done % args.block == 0:
                now = time.process_time()
                print(f"{done:>9} {done // args.groups:>8} {1000 * (now - cpu) / args.block:>18.2f}", flush=True)
                cpu = now
        await engine.close()


if __name__ == "__main__":
    asyncio.run(main())
