"""Batched ingestion: one embedding call per batch, one transaction per episode, failures kept in their slot."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from engine_support import CountingEmbedder, make_episode

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import CachedEmbedder, HashEmbedder
from mnemobus.shared.errors import InvalidMessage, StoreIntegrityError, StoreUnavailable
from mnemobus.store.model import IngestOutcome
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
G = "user_a"


async def test_a_batch_is_embedded_in_one_call_and_stored_like_single_ingests(tmp_path: Path) -> None:
    texts = ["I live in Paris.", "Alex works on ProjectX", "I use vim every day.", "I live in Paris."]
    counting = CountingEmbedder()
    store = SqliteStore(tmp_path / "batch.sqlite3")
    await store.open()
    batched = MemoryEngine(store, embedder=counting)
    single = MemoryEngine(SqliteStore(tmp_path / "single.sqlite3"), embedder=HashEmbedder())
    await single.store.open()
    try:
        eps = [make_episode(G, t, days=i) for i, t in enumerate(texts)]
        got = await batched.ingest_many(eps)
        want = [await single.ingest(ep) for ep in eps]
        assert got == want and len(counting.calls) == 1
        assert await store.count_facts(G) == await single.store.count_facts(G) == 3
    finally:
        await batched.close()
        await single.close()


async def test_a_bad_episode_fails_in_its_own_slot_and_the_others_are_stored(engine: MemoryEngine) -> None:
    good1, good2 = make_episode(G, "I live in Paris."), make_episode(G, "I use vim every day.")
    bad = replace(make_episode(G, "hello"), group_id="user a")  # type: ignore[arg-type]
    results = await engine.ingest_many([good1, bad, good2])
    assert isinstance(results[1], InvalidMessage)
    assert [r.created for r in (results[0], results[2])] == [True, True]  # type: ignore[union-attr]
    assert await engine.store.count_episodes(G) == 2


async def test_a_failing_transaction_rolls_back_only_its_episode(engine: MemoryEngine,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemobus.store import sqlite as backend

    real = backend.SqliteTxn.insert_fact

    async def refuse_paris(self, fact, embedding):  # type: ignore[no-untyped-def]
        if "Paris" in fact.fact:
            raise StoreIntegrityError(f"fact {fact.id} refused")
        await real(self, fact, embedding)

    monkeypatch.setattr(backend.SqliteTxn, "insert_fact", refuse_paris)
    results = await engine.ingest_many([make_episode(G, "I use vim every day."), make_episode(G, "I live in Paris.")])
    assert isinstance(results[0], IngestOutcome) and isinstance(results[1], StoreIntegrityError)
    assert (await engine.store.count_episodes(G), await engine.store.count_facts(G)) == (1, 1)
    assert "paris" not in {hit.entity.canonical_name for hit in await engine.search_entities(G, "paris")}


async def test_a_batch_replayed_is_reported_as_already_stored(engine: MemoryEngine) -> None:
    eps = [make_episode(G, "I live in Paris."), make_episode(G, "I use vim every day.")]
    await engine.ingest_many(eps)
    again = await engine.ingest_many(eps + eps)
    assert [r.created for r in again] == [False] * 4  # type: ignore[union-attr]
    assert await engine.store.count_episodes(G) == 2


async def test_the_same_episode_twice_in_one_batch_is_stored_once(engine: MemoryEngine) -> None:
    ep = make_episode(G, "I live in Paris.")
    results = await engine.ingest_many([ep, ep])
    assert [r.created for r in results] == [True, False]  # type: ignore[union-attr]
    assert await engine.store.count_facts(G) == 1


async def test_a_locked_store_fails_the_batch_as_unavailable_and_writes_nothing(engine: MemoryEngine) -> None:
    store = engine.store
    assert isinstance(store, SqliteStore)
    holder = sqlite3.connect(store.path, timeout=1)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        results = await engine.ingest_many([make_episode(G, "I live in Paris."), make_episode(G, "I use vim.")])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert all(isinstance(r, StoreUnavailable) for r in results)
    assert await store.count_episodes() == 0
    retried = await engine.ingest_many([make_episode(G, "I live in Paris.", msg="again")])
    assert isinstance(retried[0], IngestOutcome) and retried[0].created


async def test_an_empty_batch_gives_no_results(engine: MemoryEngine) -> None:
    assert await engine.ingest_many([]) == []


def test_cached_embedder_runs_the_model_once_per_distinct_text() -> None:
    counting = CountingEmbedder()
    cached = CachedEmbedder(counting, max_entries=2)
    first = cached.embed(["Paris", "vim", "Paris"])
    second = cached.embed(["vim", "Berlin"])
    assert counting.calls == [["Paris", "vim"], ["Berlin"]]
    assert np.array_equal(first[0], first[2]) and np.array_equal(first[1], second[0])
    assert np.array_equal(second[1], HashEmbedder().embed(["Berlin"])[0])


def test_cached_embedder_forgets_the_least_recently_used_text() -> None:
    counting = CountingEmbedder()
    cached = CachedEmbedder(counting, max_entries=2)
    cached.embed(["a", "b"])
    cached.embed(["a", "c"])  # b is now the oldest and is dropped
    cached.embed(["a", "b"])
    assert counting.calls == [["a", "b"], ["c"], ["b"]]


def test_cached_embedder_does_not_keep_long_texts() -> None:
    counting = CountingEmbedder()
    cached = CachedEmbedder(counting, max_chars=10)
    cached.embed(["a long message that will not repeat"])
    cached.embed(["a long message that will not repeat"])
    assert len(counting.calls) == 2
