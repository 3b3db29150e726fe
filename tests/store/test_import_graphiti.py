"""`mnemobus import graphiti`: a graph written by graphiti-core 0.31 itself into the local Neo4j, imported."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.sqlite import SqliteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graphio"))
from graph_support import ROOT, cli_env, mnemobus  # noqa: E402  (the graphio tests' own helpers)

pytestmark = pytest.mark.anyio
GRAPHITI_PY = ROOT / "bench" / ".venv-graphiti" / "bin" / "python"


@pytest.fixture
async def graphiti_group(neo4j_uri: str, new_group: Callable[[str], GroupId]) -> AsyncIterator[GroupId]:
    """A group of Josh's written by graphiti-core (bench/.venv-graphiti, a prerequisite of `make test`); its nodes
    are deleted afterwards (the session's Neo4j is shared)."""
    if not GRAPHITI_PY.exists():
        pytest.fail("no bench/.venv-graphiti: run `make bench/.venv-graphiti/.installed-stamp`", pytrace=False)
    group = new_group("gi")
    done = subprocess.run([str(GRAPHITI_PY), str(Path(__file__).with_name("graphiti_build.py")), neo4j_uri, group],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    yield group
    from neo4j import AsyncGraphDatabase

    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver:
        await driver.execute_query("MATCH (n {group_id: $g}) WHERE n.uuid IS NOT NULL DETACH DELETE n", g=group)


def at(month: int, day: int = 1) -> datetime:
    return datetime(2025, month, day, tzinfo=UTC)


async def imported(db: Path, group: GroupId) -> tuple[list, list, list]:  # type: ignore[type-arg]
    store = SqliteStore(db)
    await store.open()
    try:
        dump = await store.export_group(group)
    finally:
        await store.close()
    return dump.episodes, dump.entities, dump.facts


async def test_graphiti_graph_is_imported_with_its_times_and_provenance(
        tmp_path: Path, neo4j_uri: str, graphiti_group: GroupId) -> None:
    db = tmp_path / "m.sqlite3"
    proc = mnemobus("import", "graphiti", "--uri", neo4j_uri, "--group", graphiti_group, env=cli_env(db))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("read 10, stored 10, skipped 0 (already stored), dead-lettered 0")
    episodes, entities, facts = await imported(db, graphiti_group)
    assert sorted((e.name, e.type) for e, _ in entities) == [
        ("Acme", "organization"), ("Berlin", "thing"), ("Josh", "person"), ("Paris", "thing")]
    by_text = {f.fact: f for f, _ in facts}
    assert (by_text["Josh works at Acme"].valid_at, by_text["Josh works at Acme"].invalid_at) == (at(1, 31), at(4, 1))
    assert by_text["Josh lives in Berlin"].relation == "lives_in" and by_text["Josh lives in Berlin"].invalid_at is None
    assert by_text["Josh works at Acme"].episode_ids == (f"{graphiti_group}-ep0", f"{graphiti_group}-ep2")
    first = next(e for e, _, _ in episodes if e.id == f"{graphiti_group}-ep0")
    assert (first.speaker, first.role, first.reference_time) == ("Josh", "user", at(1, 31))
    assert all(v is not None and v.shape == (384,) for _, v in entities)  # embedded again, not Graphiti's 8 wide


async def test_a_second_graphiti_import_stores_nothing_twice(
        tmp_path: Path, neo4j_uri: str, graphiti_group: GroupId) -> None:
    db = tmp_path / "m.sqlite3"
    args = ("import", "graphiti", "--uri", neo4j_uri, "--group", graphiti_group)
    assert mnemobus(*args, env=cli_env(db)).returncode == 0
    again = mnemobus(*args, env=cli_env(db))
    assert again.stdout.strip().endswith("read 10, stored 0, skipped 10 (already stored), dead-lettered 0")


async def test_what_graphiti_knew_at_a_date_mnemobus_knows_at_that_date(
        tmp_path: Path, neo4j_uri: str, graphiti_group: GroupId) -> None:
    db = tmp_path / "m.sqlite3"
    assert mnemobus("import", "graphiti", "--uri", neo4j_uri, "--group", graphiti_group,
                    env=cli_env(db)).returncode == 0
    store = SqliteStore(db)
    await store.open()
    try:
        march = {f.fact for f in await store.facts_valid_at(graphiti_group, at(3, 1))}
        may = {f.fact for f in await store.facts_valid_at(graphiti_group, at(5, 1))}
    finally:
        await store.close()
    assert (march, may) == ({"Josh works at Acme", "Josh lives in Paris"}, {"Josh lives in Berlin"})
