"""Engine bench: embedder speed, ingestion episodes/s, recall p50/p99 at 10k, 100k and 1M facts.

Run: `make bench-engine` (or `.venv/bin/python bench/bench_engine.py`); QUICK=1 for a small run.

- Ingestion goes through MemoryEngine with the offline extractor as configured
  (`extraction.parse_child`, `auto` by default: a batch's parse shared with a child
  process while a core is free, never beside the local embedder), one transaction per
  episode (and the batch door once more the other way, static embedder: `_one_process_*`
  with the child on, or `ingest_batch32_static_parse_child_*`): once through `ingest` one episode at a time, once
  through `ingest_many` in batches of 32 (what the worker does per fetched
  batch); with the default `static` embedder and with the transformer itself.
- Recall sizes are bulk-loaded (resolution bypassed) with random unit vectors,
  since embedding a million sentences with the model would take the bench
  longer than the figures are worth; vector search costs the same either way.
  Recall is measured end to end through MemoryEngine.recall (full-text +
  vector + graph, fusion, weighting) with the hashing embedder for the query;
  the local model's single-query latency is reported separately and adds to it.
- Baseline: plain FTS5 BM25 on the same facts table, same group, same terms
  (the store's own text query, called directly: no thread hop, no fusion).
- Groups above the vector-index threshold get their IVF index built in the
  background on first use; the bench waits for it (figure `index_build_wait`)
  and then measures. With many groups, the first pass mostly meets groups for
  the first time (their vectors read from the file: `recall_<size>_p99`); then
  every group is asked once and the same queries run again (`_warm_`), with a
  vector budget that holds them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import peak_rss_mb, print_table, quick, summary_ms, write_results  # noqa: E402
from bench_extraction import meaning  # noqa: E402

from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.embed import CachedEmbedder, HashEmbedder, LocalOnnxEmbedder
from mnemobus.engine.embedders import make_embedder  # noqa: E402
from mnemobus.engine.extract_parse import ParsedExtractor  # noqa: E402
from mnemobus.engine.parse_process import ProcessSplitExtractor  # noqa: E402
from mnemobus.kernel.backends import offline_parser  # noqa: E402
from mnemobus.shared.config import ExtractionSettings  # noqa: E402
from mnemobus.shared.groups import GroupId  # noqa: E402
from mnemobus.store.model import Entity, Episode, Fact, IngestOutcome, RecallQuery, episode_id_for  # noqa: E402
from mnemobus.engine.text import query_terms  # noqa: E402
from mnemobus.store.sqlite import SqliteStore
from mnemobus.store.sqlite.fts import fts_search  # noqa: E402

RNG = random.Random(7)
NOW = datetime.now(UTC)
SYL = ["ka", "lo", "mi", "ren", "tor", "vel", "sa", "dun", "pri", "zo", "fe", "gar", "hul", "ix", "jen", "qua"]
VOCAB = sorted({"".join(RNG.choice(SYL) for _ in range(RNG.randint(2, 3))) for _ in range(6000)})
RELATIONS = ["uses", "works_on", "likes", "lives_in", "depends_on", "prefers", "manages", "part_of"]
STATEMENTS = [
    "I live in {c}.", "I moved from {c} to {c2}.", "I use {t} every day.", "I switched from {t} to {t2}.",
    "{P} works on {X}.", "{X} uses {t} for storage.", "{P} prefers {w} answers.", "we decided to adopt {t}.",
    "Just chatting about {w} and {w2} today, nothing important.",
]


def _episode_text() -> str:
    cap = lambda w: w.capitalize()  # noqa: E731
    return RNG.choice(STATEMENTS).format(
        c=cap(RNG.choice(VOCAB)), c2=cap(RNG.choice(VOCAB)), t=RNG.choice(VOCAB), t2=RNG.choice(VOCAB),
        P=cap(RNG.choice(VOCAB)), X=cap(RNG.choice(VOCAB)) + "X", w=RNG.choice(VOCAB), w2=RNG.choice(VOCAB))


def bench_embedder(figures: dict[str, float]) -> LocalOnnxEmbedder:
    emb = LocalOnnxEmbedder()
    emb.embed(["warm up"])
    sentences = [_episode_text() for _ in range(128 if quick() else 512)]
    t = time.perf_counter()
    emb.embed(sentences)
    figures["embed_sentences_per_s"] = round(len(sentences) / (time.perf_counter() - t), 1)
    singles = []
    for s in sentences[:50]:
        t = time.perf_counter()
        emb.embed([s])
        singles.append(time.perf_counter() - t)
    for k, v in summary_ms(singles).items():
        figures[f"embed_one_query_{k}"] = v
    # the default provider: one vector per token, distilled from the model above (README, Embeddings)
    from mnemobus.engine.embedders import make_embedder

    static = make_embedder("static", "all-MiniLM-L6-v2-int8", Path("data/embeddings"))
    static.embed(["warm up"])
    t = time.perf_counter()
    static.embed(sentences)
    figures["embed_static_sentences_per_s"] = round(len(sentences) / (time.perf_counter() - t), 1)
    return emb


def _ingest_episodes(n: int, tag: str) -> list[Episode]:
    groups = [GroupId(f"user_{i}") for i in range(20)]
    return [Episode(id=episode_id_for(groups[i % 20], f"{tag}{i}", "user"), group_id=groups[i % 20],
                    content=_episode_text(), role="user", source_message_id=f"{tag}{i}",
                    reference_time=NOW - timedelta(minutes=n - i)) for i in range(n)]


async def bench_ingest(figures: dict[str, float], root: Path) -> None:
    """Episodes/s through MemoryEngine, one at a time and in batches of 32, with each embedder.

    `static` is the default (a token table distilled from the model); `local`
    runs the transformer itself. Each run gets a fresh store and a fresh (cold)
    embedding cache, so the batched figure is not helped by names the single
    run already embedded.
    """
    n = 300 if quick() else 2000
    for provider in ("static", "local"):
        for mode in ("single", "batch32"):
            await _ingest_run(figures, root, n, provider, mode,
                              offline_parser(ExtractionSettings(), embedder=provider))  # as configured
    # the batch door the other way beside it (extraction.parse_child), last so the runs above keep their texts
    if ExtractionSettings().parse_child:
        await _ingest_run(figures, root, n, "static", "batch32", ParsedExtractor(), "_one_process")
    else:
        await _ingest_run(figures, root, n, "static", "batch32", ProcessSplitExtractor(), "_parse_child")


async def _ingest_run(figures: dict[str, float], root: Path, n: int, provider: str, mode: str,
                      parser: ParsedExtractor | ProcessSplitExtractor, label: str = "") -> None:
    """One run: a fresh store and embedder, `n` episodes one at a time or in batches of 32, the parser as given."""
    store = SqliteStore(root / f"ingest_{provider}_{mode}{label}.sqlite3")
    await store.open()
    emb = make_embedder(provider, "all-MiniLM-L6-v2-int8")
    emb.embed(["warm up"])
    engine = MemoryEngine(store, parser, embedder=emb, meaning=meaning())  # relation mapping as configured
    episodes = _ingest_episodes(n, mode)
    if isinstance(parser, ProcessSplitExtractor) and mode == "batch32":
        await parser.start()  # its parser loaded before the clock starts, as this process's was by `single`
    facts = 0
    t = time.perf_counter()
    if mode == "single":
        for ep in episodes:
            facts += (await engine.ingest(ep)).facts_added
    else:
        for i in range(0, n, 32):
            for outcome in await engine.ingest_many(episodes[i : i + 32]):
                assert isinstance(outcome, IngestOutcome), outcome
                facts += outcome.facts_added
    elapsed = time.perf_counter() - t
    key = f"ingest_{mode}_{provider}{label}"
    figures[f"{key}_episodes_per_s"] = round(n / elapsed, 1)
    figures[f"{key}_facts_added"] = facts
    if isinstance(parser, ProcessSplitExtractor):  # batches whose parse a child process shared
        figures[f"{key}_parse_child_batches"] = parser.split_batches
    if isinstance(emb, CachedEmbedder):
        figures[f"{key}_embed_cache_hit_rate"] = round(emb.hits / max(1, emb.hits + emb.misses), 3)
    await engine.close()


def _unit(rows: int, dim: int) -> np.ndarray:
    v = np.random.default_rng(rows).standard_normal((rows, dim), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def bulk_load(store: SqliteStore, total_facts: int, n_groups: int) -> list[tuple[GroupId, list[str]]]:
    """Per group: entities from the vocabulary, facts between them; returns each group's entity names."""
    per_group = total_facts // n_groups
    out = []
    batch_e: list = []
    batch_f: list = []
    for g in range(n_groups):
        group = GroupId(f"user_bench{g}")
        n_ent = max(10, per_group // 5)
        names = RNG.sample(VOCAB, min(len(VOCAB), n_ent)) if n_ent <= len(VOCAB) else [f"{RNG.choice(VOCAB)}{i}" for i in range(n_ent)]
        evecs = _unit(len(names), 384)
        ents = [Entity(id=f"{group}:e{i}", group_id=group, name=nm.capitalize(), canonical_name=nm, first_seen=NOW,
                       last_seen=NOW) for i, nm in enumerate(names)]
        batch_e += list(zip(ents, evecs, strict=True))
        fvecs = _unit(per_group, 384)
        for i in range(per_group):
            s, o = RNG.sample(ents, 2)
            rel = RNG.choice(RELATIONS)
            valid = NOW - timedelta(days=RNG.uniform(0, 60))
            invalid = valid + timedelta(days=RNG.uniform(1, 30)) if RNG.random() < 0.2 else None
            text = f"{s.name} {rel.replace('_', ' ')} {o.name} {RNG.choice(VOCAB)} {RNG.choice(VOCAB)}"
            batch_f.append((Fact(id=f"{group}:f{i}", group_id=group, subject_id=s.id, object_id=o.id,
                                 subject_name=s.name, object_name=o.name, relation=rel, edge_type="semantic",
                                 fact=text, confidence=RNG.uniform(0.5, 1.0), valid_at=valid, invalid_at=invalid,
                                 created_at=valid, last_seen=valid), fvecs[i]))
        if len(batch_f) >= 20_000 or g == n_groups - 1:
            store.bulk_load_sync(batch_e, batch_f)
            batch_e, batch_f = [], []
        out.append((group, [e.name for e in ents]))
    return out


async def bench_recall(figures: dict[str, float], label: str, total: int, n_groups: int, root: Path) -> None:
    path = root / f"recall_{label}.sqlite3"
    # many groups: a budget that holds them all (1M facts: ~1.8 GB, 2.3 GB with growth room), so the warm pass
    # measures steady state
    cache_mb = 3072 if n_groups > 1 else 512
    figures[f"vector_cache_mb_{label}"] = cache_mb
    store = SqliteStore(path, vector_cache_mb=cache_mb)
    await store.open()
    t = time.perf_counter()
    groups = await asyncio.to_thread(bulk_load, store, total, n_groups)
    figures[f"load_{label}_s"] = round(time.perf_counter() - t, 1)
    engine = MemoryEngine(store, embedder=HashEmbedder())
    queries = []
    for _ in range(300 if quick() else 1000):
        group, names = RNG.choice(groups)
        queries.append((group, f"what about {RNG.choice(names)} and {RNG.choice(VOCAB)}?"))
    for group, q in queries[:20]:  # warm the page cache and the vector matrices of a few groups
        await engine.recall(RecallQuery(q, (group,), as_of=NOW))
    t = time.perf_counter()
    store.vectors.wait_for_indexes()  # large groups: measure the indexed path, and say what the build cost
    figures[f"index_build_wait_{label}_s"] = round(time.perf_counter() - t, 1)
    lat = []
    for group, q in queries:
        t = time.perf_counter()
        await engine.recall(RecallQuery(q, (group,), as_of=NOW, max_facts=10, max_episodes=3))
        lat.append(time.perf_counter() - t)
    if n_groups > 1:
        # the pass above mostly met groups for the first time (their vectors read from the file); now every
        # group has been asked once, as an active user's group has, and the same queries run again
        for group, names in groups:
            await engine.recall(RecallQuery(f"what about {names[0]}?", (group,), as_of=NOW))
        warm = []
        for group, q in queries:
            t = time.perf_counter()
            await engine.recall(RecallQuery(q, (group,), as_of=NOW, max_facts=10, max_episodes=3))
            warm.append(time.perf_counter() - t)
        ws = summary_ms(warm)
        figures[f"recall_{label}_warm_p50_ms"] = ws["p50_ms"]
        figures[f"recall_{label}_warm_p99_ms"] = ws["p99_ms"]
    fts = []
    # the baseline: one BM25 query for the same terms in the same group, no hop, on a connection of its own
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as reader:
        for group, q in queries:
            terms = query_terms(q)
            t = time.perf_counter()
            fts_search(reader, "facts_fts", group, terms, 10)
            fts.append(time.perf_counter() - t)
    rs, fs = summary_ms(lat), summary_ms(fts)
    figures[f"recall_{label}_p50_ms"] = rs["p50_ms"]
    figures[f"recall_{label}_p99_ms"] = rs["p99_ms"]
    figures[f"fts5_{label}_p50_ms"] = fs["p50_ms"]
    figures[f"fts5_{label}_p99_ms"] = fs["p99_ms"]
    figures[f"ratio_{label}_p50_vs_fts5"] = round(rs["p50_ms"] / max(fs["p50_ms"], 1e-6), 1)
    await engine.close()
    figures[f"file_{label}_mb"] = round(sum(p.stat().st_size for p in root.glob(f"recall_{label}.sqlite3*")) / 2**20, 1)
    for p in root.glob(f"recall_{label}.sqlite3*"):
        p.unlink()


async def main() -> None:
    figures: dict[str, float] = {}
    sizes = [("2k", 2_000, 1), ("10k", 10_000, 1), ("20k_100g", 20_000, 100)] if quick() else [
        ("10k", 10_000, 1), ("100k", 100_000, 1), ("1m_1000g", 1_000_000, 1000)]
    only = os.environ.get("BENCH_SIZES")
    if only:
        sizes = [s for s in sizes if s[0] in only.split(",")]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        root = Path(tmp)
        if os.environ.get("BENCH_SKIP_INGEST", "") in ("", "0"):
            bench_embedder(figures)
            await bench_ingest(figures, root)
            print(f"  ingest: {figures}", flush=True)
        for label, total, n_groups in sizes:
            await bench_recall(figures, label, total, n_groups, root)
            print(f"  done {label}: { {k: v for k, v in figures.items() if label in k} }", flush=True)
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("mnemobus engine (SQLite, embedded)", figures)
    partial = bool(os.environ.get("BENCH_SIZES")) or os.environ.get("BENCH_SKIP_INGEST", "") not in ("", "0")
    write_results("bench_engine", figures, baseline="plain FTS5 BM25 query on the same facts, same group", merge=partial)


if __name__ == "__main__":
    asyncio.run(main())
