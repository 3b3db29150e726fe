"""`mnemobus migrate` between the embedded store and Neo4j: rows, embeddings and counts survive."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.kernel.migrate import migrate
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.sqlite import SqliteStore
from test_conformance import T0, alice_graph, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def test_migrate_copies_a_group_from_neo4j_to_sqlite_with_counts_checked(
    tmp_path: Path, neo4j_uri: str, new_group: Callable[[str], GroupId]
) -> None:
    group = new_group("mig")
    neo, lite = Neo4jStore(neo4j_uri), SqliteStore(tmp_path / "copy.sqlite3")
    await neo.open()
    await lite.open()
    seen: list[tuple[str, int, int]] = []
    try:
        g = await alice_graph(neo, group)
        counts = await migrate(neo, lite, [group], progress=lambda w, d, t: seen.append((w, d, t)))
        assert [(c.episodes, c.entities, c.facts) for c in counts] == [(1, 5, 4)]
        assert seen[-1][1] == seen[-1][2] == 10
        hits = await lite.search_facts_vector(group, vec("Acme is located in Berlin"), T0 + timedelta(days=1), 1)
        assert hits[0].id == g["facts"][1].id  # type: ignore[index]
    finally:
        await neo.delete_group(group)
        await neo.close()
        await lite.close()


async def test_migrate_run_twice_copies_nothing_twice(
    tmp_path: Path, neo4j_uri: str, new_group: Callable[[str], GroupId]
) -> None:
    group = new_group("mig")
    neo, lite = Neo4jStore(neo4j_uri), SqliteStore(tmp_path / "copy.sqlite3")
    await neo.open()
    await lite.open()
    try:
        await alice_graph(neo, group)
        await migrate(neo, lite, [group])
        again = await migrate(neo, lite, [group])
        assert [(c.episodes, c.entities, c.facts) for c in again] == [(1, 5, 4)]
    finally:
        await neo.delete_group(group)
        await neo.close()
        await lite.close()


async def test_migrate_round_trips_sqlite_to_neo4j_and_back(
    tmp_path: Path, neo4j_uri: str, new_group: Callable[[str], GroupId]
) -> None:
    group = new_group("mig")
    lite, neo, back = SqliteStore(tmp_path / "a.sqlite3"), Neo4jStore(neo4j_uri), SqliteStore(tmp_path / "b.sqlite3")
    for s in (lite, neo, back):
        await s.open()
    try:
        g = await alice_graph(lite, group)
        await migrate(lite, neo, [group])
        await migrate(neo, back, [group])
        ids = [f.id for f in g["facts"]]  # type: ignore[attr-defined]
        assert await back.get_facts(group, ids) == await lite.get_facts(group, ids)
    finally:
        await neo.delete_group(group)
        for s in (lite, neo, back):
            await s.close()
