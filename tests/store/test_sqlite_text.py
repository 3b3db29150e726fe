"""SqliteStore text search: the two ways of applying the group inside FTS5 give the same answers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.sqlite import fts as backend
from mnemobus.store.model import Entity, Fact
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _rows(group: GroupId, n: int) -> tuple[list[tuple[Entity, None]], list[tuple[Fact, None]]]:
    people = [Entity(id=f"{group}:p{i}", group_id=group, name=f"Person{i}", canonical_name=f"person{i}")
              for i in range(3)]
    facts = [
        (Fact(id=f"{group}:f{i}", group_id=group, subject_id=people[i % 3].id, object_id=people[(i + 1) % 3].id,
              subject_name=people[i % 3].name, object_name=people[(i + 1) % 3].name, relation="knows",
              edge_type="semantic", fact=f"{people[i % 3].name} knows coffee " + "tea " * (i % 4),
              confidence=0.9, valid_at=T0, invalid_at=None, created_at=T0), None)
        for i in range(n)
    ]
    return [(p, None) for p in people], facts


async def test_group_token_and_join_filter_rank_the_same(sqlite_store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    for group in (GroupId("user_a"), GroupId("user_b")):
        sqlite_store.bulk_load_sync(*_rows(group, 40))
    monkeypatch.setattr(backend, "GROUP_TOKEN_BIAS", 0)  # every search applies the group on the row reads
    by_join = await sqlite_store.search_facts_text(GroupId("user_a"), ["tea", "coffee"], T0, 10)
    monkeypatch.setattr(backend, "GROUP_TOKEN_BIAS", 10**9)  # every search narrows by the group token
    by_token = await sqlite_store.search_facts_text(GroupId("user_a"), ["tea", "coffee"], T0, 10)
    assert [h.id for h in by_join] == [h.id for h in by_token]
    assert len(by_join) == 10 and all(h.id.startswith("user_a:") for h in by_join)


async def test_a_ranking_that_held_every_match_is_not_asked_again_wider(sqlite_store: SqliteStore) -> None:
    """A name in one row of each of two groups: the first cut (two rows) holds both, one of them the group's; the
    group has fewer rows than asked for, and a wider cut could find no more."""
    for group in (GroupId("user_a"), GroupId("user_b")):
        sqlite_store.bulk_load_sync([], _drink_rows(group, 30, lambda i: "vopefosi tea" if i == 7 else "water"))
    rankings: list[str] = []
    c = sqlite3.connect(sqlite_store.path)
    c.set_trace_callback(lambda sql: rankings.append(sql) if "bm25(" in sql else None)
    try:
        hits = backend.fts_search(c, "facts_fts", "user_a", ["vopefosi"], 10, counts=backend.TermCounts())
    finally:
        c.close()
    assert [h.id for h in hits] == ["user_a:d7"]
    assert len(rankings) == 1, rankings


async def test_terms_matching_nothing_give_no_hits(sqlite_store: SqliteStore) -> None:
    sqlite_store.bulk_load_sync(*_rows(GroupId("user_a"), 5))
    assert await sqlite_store.search_facts_text(GroupId("user_a"), ["nowhere"], T0, 10) == []


def _drink_rows(group: GroupId, n: int, what: Callable[[int], str], width: int = 0) -> list[tuple[Fact, None]]:
    """n facts "Person drinks <what(i)>", ids numbered from 0 (zero-padded to `width`)."""
    person = f"{group}:p"
    return [(Fact(id=f"{group}:d{i:0{width}d}", group_id=group, subject_id=person, object_id=person,
                  subject_name="Person", object_name="Person", relation="drinks", edge_type="semantic",
                  fact="Person drinks " + what(i), confidence=0.9, valid_at=T0, invalid_at=None, created_at=T0), None)
            for i in range(n)]


def _drinks(group: GroupId, n: int, rare_every: int) -> list[tuple[Fact, None]]:
    return _drink_rows(group, n, lambda i: "coffee" + (" with cardamom" if i % rare_every == 0 else ""))


async def test_words_in_half_the_rows_or_more_are_left_out_of_a_large_search(sqlite_store: SqliteStore) -> None:
    """FTS5 gives such words no weight (IDF clamped to ~0) yet walks all their rows: the rare word alone decides."""
    group = GroupId("user_a")
    sqlite_store.bulk_load_sync([], _drinks(group, backend.PRUNE_MIN_ROWS + 200, rare_every=100))
    both = await sqlite_store.search_facts_text(group, ["coffee", "cardamom"], T0, 50)
    common_only = await sqlite_store.search_facts_text(group, ["coffee"], T0, 50)
    assert len(both) == 12 and all(int(h.id.split(":d")[1]) % 100 == 0 for h in both)
    assert common_only == []


async def test_a_small_table_searches_every_word(sqlite_store: SqliteStore) -> None:
    group = GroupId("user_a")
    sqlite_store.bulk_load_sync([], _drinks(group, 50, rare_every=10))
    common_only = await sqlite_store.search_facts_text(group, ["coffee"], T0, 100)
    assert len(common_only) == 50


async def test_rows_with_only_a_much_weaker_word_are_left_out_when_rare_words_find_rows(sqlite_store: SqliteStore) -> None:
    """Ranking every row "coffee" matches would cost ~2 us a row; the rows that hold "cardamom" are the answer."""
    group = GroupId("user_a")
    rows = _drink_rows(group, 3000, lambda i: ("coffee" if i % 5 < 2 else "water")
                       + (" with cardamom" if i % 300 in (0, 3) else ""), width=4)
    sqlite_store.bulk_load_sync([], rows)  # coffee in 1,200 rows (40%: not weightless), cardamom in 20
    hits = await sqlite_store.search_facts_text(group, ["coffee", "cardamom"], T0, 50)
    numbers = [int(h.id.split(":d")[1]) for h in hits]
    assert len(numbers) == 20 and all(n % 300 in (0, 3) for n in numbers)
    assert all(n % 300 == 0 for n in numbers[:10])  # holding both words first, as the whole query ranks them


async def test_a_read_only_process_writes_its_retrieval_counts_in_the_background(tmp_path: Path) -> None:
    import sqlite3

    import anyio

    store = SqliteStore(tmp_path / "t.sqlite3")
    await store.open()
    try:
        group = GroupId("user_a")
        store.bulk_load_sync([], _drinks(group, 1000, rare_every=10))
        await store.mark_retrieved(group, [f"{group}:d{i}" for i in range(1000)])  # returns without writing
        other = sqlite3.connect(store.path)
        with anyio.fail_after(5):
            while other.execute("SELECT count(*) FROM facts WHERE retrieval_count = 1").fetchone()[0] < 1000:
                await anyio.sleep(0.02)
        other.close()
    finally:
        await store.close()
    assert store._pending_retrievals == {}



async def test_a_store_erased_after_each_of_fifteen_hundred_writes_keeps_its_full_text_index_readable(
        sqlite_store: SqliteStore) -> None:
    """Every user erasure ends with `erase_residue`. With SQLite 3.40's FTS5 'optimize' the index went one level
    deeper each time it ran after a write, and the 1,189th made the table unreadable ("database disk image is
    malformed"): a store that erases users often would lose its words to every text search, and fail every write."""
    group = GroupId("user_a")
    (template, _), = _drink_rows(group, 1, lambda _: "tea")
    for i in range(1_500):
        fact = replace(template, id=f"{group}:e{i}", fact=f"Person drinks tea number{i}")
        sqlite_store.bulk_load_sync([], [(fact, None)])
        await sqlite_store.erase_residue()
    hits = await sqlite_store.search_facts_text(group, ["number1499"], T0, 10)
    assert [h.id for h in hits] == [f"{group}:e1499"]
