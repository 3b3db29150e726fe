"""The Graphiti bench's corpus, arithmetic and embedder plumbing (no Neo4j, no Graphiti run)."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench.bench_graphiti import (
    SIZES,
    RecordingEmbedder,
    embed_corpus,
    embedder_spec,
    latency_figures,
    make_bench_embedder,
    make_corpus,
    peak_rss_of,
    recall_of,
    vector_diff,
)
from mnemobus.shared.config import EmbeddingSettings
from mnemobus.engine.embed import CachedEmbedder, HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
GRAPHITI_PY = ROOT / "bench" / ".venv-graphiti" / "bin" / "python"


def test_every_query_has_exactly_one_matching_fact() -> None:
    corpus = make_corpus(800, 2, 50)
    facts = {f["id"]: f for f in corpus["facts"]}
    assert len(corpus["facts"]) == 800 and len(corpus["queries"]) == 50
    pairs = Counter((f["group"], f["subject"], f["relation"]) for f in corpus["facts"])
    assert max(pairs.values()) == 1  # one fact per (person, relation): the answer is unambiguous
    for q in corpus["queries"]:
        answer = facts[q["answer"]]
        assert answer["group"] == q["group"] and answer["subject"] in q["text"]
    ids = {e["id"] for e in corpus["entities"]}
    assert all(f["subject_id"] in ids and f["object_id"] in ids for f in corpus["facts"])


def test_the_corpus_is_the_same_every_time() -> None:
    assert make_corpus(300, 1, 20)["facts"] == make_corpus(300, 1, 20)["facts"]


def test_the_100k_size_is_split_into_groups_and_asks_fewer_queries() -> None:
    facts, groups, queries, _heap, _pagecache = SIZES["100k"]
    assert facts == 100_000 and groups > 1 and queries < SIZES["10k"][2]


def test_recall_counts_the_answer_within_k() -> None:
    queries = [{"answer": "a"}, {"answer": "b"}]
    assert recall_of([["x", "a"], ["b"]], queries, 1) == 0.5
    assert recall_of([["x", "a"], ["b"]], queries, 2) == 1.0
    assert recall_of([[], []], queries, 5) == 0.0


def test_latency_figures_are_milliseconds() -> None:
    figures = latency_figures([0.001 * i for i in range(1, 101)])
    assert figures == {"p50_ms": 51.0, "p95_ms": 95.0, "p99_ms": 99.0}


def test_vector_diff_compares_only_texts_both_sides_embedded() -> None:
    a = {"q1": np.array([1.0, 0.0]), "q2": np.array([0.0, 1.0])}
    b = {"q1": np.array([1.0, 0.25]), "q3": np.array([5.0, 5.0])}
    assert vector_diff(a, b) == (1, 0.25)
    assert vector_diff(a, {}) == (0, None)


def test_peak_rss_is_this_process_in_mib_not_kib() -> None:
    mib = peak_rss_of()
    if mib is None:
        pytest.skip("no /proc")
    total_mib = int(Path("/proc/meminfo").read_text().split()[1]) / 1024
    assert 10 < mib < total_mib  # the 55,753 "MB" of an earlier run was more than the machine has
    assert peak_rss_of(2**31) is None  # no such process


def test_embedder_defaults_to_the_product_default_and_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBEDDER", raising=False)
    spec = embedder_spec()
    assert spec["provider"] == EmbeddingSettings().provider
    assert Path(spec["cache_dir"]).is_absolute()
    monkeypatch.setenv("EMBEDDER", "local")
    assert embedder_spec()["provider"] == "local"


def test_bench_embedder_is_uncached() -> None:
    def fake_make(provider: str, model: str, cache_dir: str) -> CachedEmbedder:
        return CachedEmbedder(HashEmbedder())

    emb = make_bench_embedder({"provider": "local", "model": "m", "cache_dir": "."}, fake_make)
    assert isinstance(emb, HashEmbedder)


def test_recording_embedder_keeps_single_query_vectors() -> None:
    rec = RecordingEmbedder(HashEmbedder())
    one = rec.embed(["where does Ana live?"])
    rec.embed(["a", "b"])  # batches (corpus, warm-up) are not queries
    assert list(rec.vectors) == ["where does Ana live?"]
    assert np.array_equal(rec.vectors["where does Ana live?"], one[0])


def test_corpus_vectors_are_cached_per_embedder(tmp_path: Path) -> None:
    corpus = make_corpus(100, 1, 5)
    spec = {"provider": "hash", "model": "all-MiniLM-L6-v2-int8", "cache_dir": str(tmp_path)}
    ent, fact = embed_corpus(corpus, tmp_path, spec)
    assert ent.shape == (len(corpus["entities"]), 384) and fact.shape == (100, 384)
    assert ent.dtype == np.float32
    again_ent, _ = embed_corpus(corpus, tmp_path, spec)
    assert np.array_equal(ent, again_ent)
    assert len(list(tmp_path.glob("gbench_*_hash_*.npy"))) == 2


_SIDE = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
import graphiti_side
client = graphiti_side.MnemobusEmbedderClient(json.loads(sys.argv[2]))
vec = asyncio.run(client.create(["Where does Ana Silva live?"]))
print(json.dumps({"vec": vec, "name": client.model.name, "engine_imported": "mnemobus.engine" in sys.modules}))
"""


@pytest.mark.skipif(not GRAPHITI_PY.exists(), reason="bench/.venv-graphiti is not installed")
@pytest.mark.parametrize("provider", ["hash", "static"])
def test_graphiti_side_embeds_queries_exactly_like_mnemobus(provider: str, static_cache_dir: Path) -> None:
    # the run's one static table (built here if no test of this run has yet): never a skip that depends on order
    spec = {**embedder_spec(), "provider": provider, "cache_dir": str(static_cache_dir)}
    mine = make_bench_embedder(spec)
    mine.embed(["build the table before the other side reads it"])
    env = {**os.environ, "PYTHONPATH": ""}
    proc = subprocess.run([str(GRAPHITI_PY), "-c", _SIDE, str(ROOT / "bench"), json.dumps(spec)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["name"] == mine.name
    assert not got["engine_imported"]  # embed.py / embed_static.py by path, never the engine package
    assert np.array_equal(np.asarray(got["vec"], dtype=np.float32), mine.embed(["Where does Ana Silva live?"])[0])

