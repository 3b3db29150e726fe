"""CPU per episode of the batch door (`MemoryEngine.ingest_many`, batches of 32, bench-engine's episodes, the
static embedder, SQLite) in this process and in the parse child, with and without `extraction.parse_child`.

Why: on the shared 2-core machine wall time swings several fold between runs of one tree; CPU seconds do not. With
the child, the batch door's speed on a quiet machine is bounded by the busier of the two processes, so both are
printed: this process's CPU per episode, and the child's (its parser's loading, measured alone first, taken off).

Usage: `.venv/bin/python bench/profile_batch_door.py [--episodes 600] [--one-process | --auto] [--chunks 3]
[--here-share 0.2]`, from a checkout's root (`--chunks` and `--here-share` try other cuts of a batch, `--auto` the
`parse_child: auto` mode: how many batches it gave the child is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import _ingest_episodes  # noqa: E402
from bench_extraction import meaning  # noqa: E402

from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.embedders import make_embedder  # noqa: E402
from mnemobus.engine.extract_parse import ParsedExtractor  # noqa: E402
from mnemobus.engine.parse_process import CHUNKS, HERE_SHARE, ProcessSplitExtractor  # noqa: E402
from mnemobus.store.model import IngestOutcome  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


async def child_loading_cpu() -> float:
    """A child's CPU for starting and loading its parser (ended and reaped)."""
    before = children_cpu()
    split = ProcessSplitExtractor()
    await split.start()
    await split.aclose()
    return children_cpu() - before


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=600)
    ap.add_argument("--one-process", action="store_true")
    ap.add_argument("--auto", action="store_true")
    ap.add_argument("--chunks", type=int, default=CHUNKS)
    ap.add_argument("--here-share", type=float, default=HERE_SHARE)
    args = ap.parse_args()
    loading = 0.0 if args.one_process else await child_loading_cpu()
    extractor = ParsedExtractor() if args.one_process else ProcessSplitExtractor(
        n_chunks=args.chunks, here_share=args.here_share, auto=args.auto)
    if isinstance(extractor, ProcessSplitExtractor):
        await extractor.start()  # else `--auto` started it (loading its parser) inside the timed batches
    with tempfile.TemporaryDirectory(prefix="batch-door-") as tmp:
        store = SqliteStore(Path(tmp) / "m.sqlite3")
        await store.open()
        emb = make_embedder("static", "all-MiniLM-L6-v2-int8")
        emb.embed(["warm up"])
        engine = MemoryEngine(store, extractor, embedder=emb, meaning=meaning())
        await engine.ingest_many(_ingest_episodes(32, "warm"))  # the parsers and the relation model load
        episodes = _ingest_episodes(args.episodes, "batch32")
        facts, children = 0, children_cpu()
        cpu, wall = time.process_time(), time.perf_counter()
        for i in range(0, len(episodes), 32):
            for outcome in await engine.ingest_many(episodes[i:i + 32]):
                assert isinstance(outcome, IngestOutcome), outcome
                facts += outcome.facts_added
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await engine.close()  # the child ends here: its CPU is counted once it is reaped
        child = children_cpu() - children - loading
    n = len(episodes)
    print(f"{'one process' if args.one_process else 'parse child'}: {n / wall:.1f} episodes/s wall, "
          f"this process {1000 * cpu / n:.2f} ms CPU an episode, child {1000 * max(child, 0.0) / (n + 32):.2f} ms "
          f"(over the warm-up batch too; its loading, {loading:.2f} s, taken off), facts added {facts}"
          + ("" if args.one_process else f", batches split {extractor.split_batches}")  # type: ignore[union-attr]
          + f", load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
