"""SqliteStore's in-memory fact graphs: the walk, the validity filter and ranking see every committed write.

`reader` keeps a group's graph in memory; `writer` is a second store on the same file, which
is what the extraction worker is to a plugin. Each write that changes what the graph holds
(a new fact, an invalidation, a retrieval count, a deletion) must show in reader's next read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Standing
from mnemobus.store.fact_graph import FactGraph
from mnemobus.store.sqlite import SCHEMA_VERSION, SqliteStore
from test_conformance import T0, alice_graph, entity, episode, fact, put, vec  # same folder (pytest prepend import mode)
from test_sqlite_text import _drinks  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
G = GroupId("user_graph")
LATER = T0 + timedelta(days=1)


@pytest.fixture
def reader(sqlite_store: SqliteStore) -> SqliteStore:
    """Keeps the group's graph in memory between reads."""
    return sqlite_store


@pytest.fixture
async def writer(reader: SqliteStore) -> AsyncIterator[SqliteStore]:
    """A second store on the same file: another process, as far as the graph can tell."""
    store = SqliteStore(reader.path)
    await store.open()
    yield store
    await store.close()


async def _walked(store: SqliteStore, seed: str) -> list[str]:
    return [s.fact_id for s in await store.walk(G, [seed], as_of=LATER, max_hops=1)]


async def test_a_fact_another_store_writes_is_walked_on_the_next_read(reader: SqliteStore, writer: SqliteStore) -> None:
    g = await alice_graph(writer, G)
    before = await _walked(reader, g["alice"].id)  # type: ignore[attr-defined]
    tea = entity(G, "Tea", kind="thing")
    likes_tea = fact(G, g["alice"], "likes", tea, "Alice likes tea", confidence=0.95)  # type: ignore[arg-type]
    await put(writer, entities=[tea], facts=[likes_tea])
    assert likes_tea.id not in before
    assert (await _walked(reader, g["alice"].id))[0] == likes_tea.id  # type: ignore[attr-defined]


async def test_an_invalidation_another_store_writes_ends_the_fact_for_walk_and_vector_search(
    reader: SqliteStore, writer: SqliteStore
) -> None:
    g = await alice_graph(writer, G)
    coffee = g["facts"][3]  # type: ignore[index]
    assert coffee.id in await _walked(reader, g["alice"].id)  # type: ignore[attr-defined]
    async with writer.transaction() as tx:
        await tx.update_fact(replace(coffee, invalid_at=T0 + timedelta(hours=1)))
    assert coffee.id not in await _walked(reader, g["alice"].id)  # type: ignore[attr-defined]
    hits = await reader.search_facts_vector(G, vec("Alice likes strong coffee"), LATER, 10)
    assert coffee.id not in [h.id for h in hits]


async def test_a_retrieval_count_another_store_writes_reaches_the_standings(reader: SqliteStore, writer: SqliteStore) -> None:
    g = await alice_graph(writer, G)
    works = g["facts"][0]  # type: ignore[index]
    assert (await reader.fact_standings(G, [works.id]))[0].retrieval_count == 0
    await writer.mark_retrieved(G, [works.id, works.id])
    await writer.close()  # writes the counts it holds
    assert (await reader.fact_standings(G, [works.id]))[0].retrieval_count == 2


async def test_an_episode_another_store_deletes_takes_its_facts_out_of_the_graph(
    reader: SqliteStore, writer: SqliteStore
) -> None:
    g = await alice_graph(writer, G)
    assert len(await _walked(reader, g["alice"].id)) == 2  # type: ignore[attr-defined]
    await writer.delete_episode(G, g["ep"].id)  # type: ignore[attr-defined]
    assert await _walked(reader, g["alice"].id) == []  # type: ignore[attr-defined]
    assert await reader.fact_standings(G, [f.id for f in g["facts"]]) == []  # type: ignore[attr-defined]


async def test_standings_carry_what_get_facts_gives(reader: SqliteStore) -> None:
    g = await alice_graph(reader, G)
    ids = [f.id for f in g["facts"]]  # type: ignore[attr-defined]
    await reader.mark_retrieved(G, ids[:1])  # pending in this process: counted by both reads
    whole = await reader.get_facts(G, ids)
    standings = await reader.fact_standings(G, list(reversed(ids)) + ["missing"])
    assert [s.id for s in standings] == list(reversed(ids))
    for s, f in zip(standings, reversed(whole)):
        w = Standing.of(f)
        assert (s.fact, s.confidence, s.retrieval_count) == (w.fact, w.confidence, w.retrieval_count)
        assert s.observed_s == pytest.approx(w.observed_s, abs=1e-6)


async def test_a_fact_written_after_another_store_deleted_rows_is_found_by_vector_search(
    reader: SqliteStore, writer: SqliteStore
) -> None:
    g = await alice_graph(writer, G)
    assert await reader.search_facts_vector(G, vec("Alice likes strong coffee"), LATER, 10)  # vectors held
    await writer.delete_episode(G, g["ep"].id)  # type: ignore[attr-defined]
    ep = episode(G, "m2", "Alice drinks green tea now")
    tea = entity(G, "Tea", kind="thing")
    tea_fact = fact(G, g["alice"], "drinks", tea, "Alice drinks green tea", ep=ep)  # type: ignore[arg-type]
    await put(writer, episodes=[ep], entities=[tea], facts=[tea_fact])  # the fact takes a deleted fact's rowid
    hits = await reader.search_facts_vector(G, vec("Alice drinks green tea"), LATER, 10)
    assert [h.id for h in hits] == [tea_fact.id]


async def _schema_1_file(path: Path) -> dict[str, object]:
    """A file as schema 1 wrote it (no stamps, no triggers, no version table), holding alice_graph."""
    store = SqliteStore(path)
    await store.open()
    g = await alice_graph(store, G)
    await store.close()
    with sqlite3.connect(path) as conn:
        for trigger in ("facts_stamp_insert", "facts_stamp_update", "facts_stamp_delete"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE group_versions")
        conn.execute("DROP INDEX facts_stamped")
        conn.execute("ALTER TABLE facts DROP COLUMN ver")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    return g


async def test_a_file_written_before_versions_is_versioned_on_open_and_walked(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    g = await _schema_1_file(path)
    store = SqliteStore(path)
    await store.open()
    try:
        assert len(await _walked(store, g["alice"].id)) == 2  # type: ignore[attr-defined]
        tea = entity(G, "Tea", kind="thing")
        await put(store, entities=[tea], facts=[fact(G, g["alice"], "likes", tea, "Alice likes tea")])  # type: ignore[arg-type]
        assert len(await _walked(store, g["alice"].id)) == 3  # type: ignore[attr-defined]
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)


async def test_a_deletion_in_a_group_not_written_since_versions_existed_reaches_the_graph(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    g = await _schema_1_file(path)
    reader, writer = SqliteStore(path), SqliteStore(path)
    await reader.open()
    await writer.open()
    try:
        assert len(await _walked(reader, g["alice"].id)) == 2  # type: ignore[attr-defined]
        await writer.delete_episode(G, g["ep"].id)  # type: ignore[attr-defined]
        assert await _walked(reader, g["alice"].id) == []  # type: ignore[attr-defined]
    finally:
        await writer.close()
        await reader.close()


async def _counted_in_background(store: SqliteStore, ids: list[str]) -> None:
    """1,000 retrievals or more are written by a thread of the store's own: marked, then that thread waited for."""
    import anyio

    await store.mark_retrieved(G, ids)
    assert store._count_writer is not None
    await anyio.to_thread.run_sync(store._count_writer.join, 10.0)


async def _held_with_1000_facts(store: SqliteStore) -> tuple[list[str], FactGraph]:
    """1,000 facts in G, and the group's graph held from here on: the count writer's ids and the graph it tells."""
    rows = _drinks(G, 1000, rare_every=10)
    store.bulk_load_sync([], rows)
    ids = [f.id for f, _ in rows]
    await store.fact_standings(G, ids[:1])
    held = store.graphs.cache.get(G)
    assert held is not None
    return ids, held


def _file_version(store: SqliteStore) -> int:
    with sqlite3.connect(store.path) as other:
        return other.execute("SELECT ver FROM group_versions WHERE group_id = ?", (G,)).fetchone()[0]


async def test_the_background_retrieval_count_writer_tells_the_held_graph_its_counts(reader: SqliteStore) -> None:
    """Not read back by the group's next recall: that read was 1,000 rows at 100k facts (the p99)."""
    ids, held = await _held_with_1000_facts(reader)
    await _counted_in_background(reader, ids)
    assert held.version == _file_version(reader)
    assert {s.retrieval_count for s in held.standings(ids, {})} == {1}


async def test_a_recall_does_not_wait_for_the_count_writers_commit(
    reader: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held graph has the counts and the new version before the commit, its lock free: with the lock held
    across the commit (its WAL writes and checkpoint), the group's recalls waited 10-25 ms at 100k facts."""
    from contextlib import contextmanager

    ids, held = await _held_with_1000_facts(reader)
    counting = reader.graphs.counting
    at_commit: list[tuple[bool, int, set[int]]] = []

    @contextmanager
    def watched(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                counts: dict[str, int]) -> Iterator[list[str]]:
        with counting(before, after, counts) as done:
            lock_taken = reader.graphs._lock(G).acquire(blocking=False)
            if lock_taken:
                reader.graphs._lock(G).release()
            at_commit.append((lock_taken, held.version, {s.retrieval_count for s in held.standings(ids, {})}))
            yield done

    monkeypatch.setattr(reader.graphs, "counting", watched)
    await _counted_in_background(reader, ids)
    assert at_commit == [(True, _file_version(reader), {1})]


async def test_a_count_commit_that_fails_drops_the_graphs_it_told(reader: SqliteStore) -> None:
    """They were told the counts before the commit: kept, they would hold counts the file has not, at a version
    the file may reach with other rows."""
    g = await alice_graph(reader, G)
    await reader.walk(G, [g["alice"]], as_of=LATER, max_hops=1)
    held = reader.graphs.cache.get(G)
    assert held is not None
    at = (held.epoch, held.version)
    with pytest.raises(sqlite3.OperationalError):
        with reader.graphs.counting({G: at}, {G: (at[0], at[1] + 1)}, {}) as told:
            assert told == [G]
            raise sqlite3.OperationalError("disk I/O error")
    assert reader.graphs.cache.get(G) is None


async def test_a_held_graph_behind_the_file_is_left_to_its_next_read_by_the_count_writer(
    reader: SqliteStore, writer: SqliteStore
) -> None:
    """Its counts alone would skip the other process's write; the next read takes both."""
    g = await alice_graph(writer, G)
    ids, held = await _held_with_1000_facts(reader)
    tea = entity(G, "Tea", kind="thing")
    likes_tea = fact(G, g["alice"], "likes", tea, "Alice likes tea", confidence=0.95)  # type: ignore[arg-type]
    await put(writer, entities=[tea], facts=[likes_tea])  # the held graph is behind the file from here
    await _counted_in_background(reader, ids)
    assert held.version < _file_version(reader)
    standings = await reader.fact_standings(G, [likes_tea.id, *ids])
    assert standings[0].id == likes_tea.id and {s.retrieval_count for s in standings[1:]} == {1}
