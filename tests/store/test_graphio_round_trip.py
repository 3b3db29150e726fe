"""Export, erase, import: the jsonl export rebuilds a group exactly, on both stores, through the real CLI."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import numpy as np
import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import GroupExport

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "graphio"))
from graph_support import build_josh, cli_env, mnemobus  # noqa: E402  (the graphio tests' own helpers)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=("sqlite", "neo4j"))
async def backend(request: pytest.FixtureRequest, tmp_path: Path,
                  new_group: Callable[[str], GroupId]) -> AsyncIterator[tuple[Callable[[], GraphStore], dict[str, str]]]:
    """A way to open the store, and the CLI environment that names the same store."""
    db = tmp_path / "m.sqlite3"
    if request.param == "sqlite":
        from mnemobus.store.sqlite import SqliteStore

        yield (lambda: SqliteStore(db)), cli_env(db)
        return
    from mnemobus.store.neo4j import Neo4jStore

    uri = request.getfixturevalue("neo4j_uri")
    yield (lambda: Neo4jStore(uri)), cli_env(db, MNEMOBUS_STORE__BACKEND="neo4j", MNEMOBUS_STORE__NEO4J__URI=uri)
    store = Neo4jStore(uri)
    await store.open()
    for gid in new_group.made:  # type: ignore[attr-defined]
        await store.delete_group(gid)
    await store.close()


async def _in_store(open_store: Callable[[], GraphStore], work: Callable[[GraphStore], object]) -> object:
    store = open_store()
    await store.open()
    try:
        return await work(store)  # type: ignore[misc]
    finally:
        await store.close()


def _same(a: GroupExport, b: GroupExport) -> None:
    assert [e for e, _, _ in a.episodes] == [e for e, _, _ in b.episodes]
    assert [s for _, s, _ in a.episodes] == [s for _, s, _ in b.episodes]
    assert sorted((e for e, _ in a.entities), key=lambda e: e.id) == sorted((e for e, _ in b.entities), key=lambda e: e.id)
    assert sorted((f for f, _ in a.facts), key=lambda f: f.id) == sorted((f for f, _ in b.facts), key=lambda f: f.id)
    assert sorted(a.mentions) == sorted(b.mentions)
    vectors = lambda d: {r[0].id: r[-1] for r in [*d.entities, *d.facts, *d.episodes]}  # noqa: E731
    va, vb = vectors(a), vectors(b)
    assert va.keys() == vb.keys() and all(np.array_equal(va[k], vb[k]) for k in va)


async def test_export_erase_import_gives_back_the_same_episodes_and_facts(
        backend: tuple[Callable[[], GraphStore], dict[str, str]], new_group: Callable[[str], GroupId],
        tmp_path: Path) -> None:
    open_store, env = backend
    group = new_group("rt")

    async def build(store: GraphStore) -> GroupExport:
        await build_josh(store, group)
        return await store.export_group(group)

    before: GroupExport = await _in_store(open_store, build)  # type: ignore[assignment]
    assert len(before.facts) >= 7 and any(f.invalid_at for f, _ in before.facts)  # history, not only active facts
    out = tmp_path / "josh.jsonl"
    proc = mnemobus("graph", "export", group, "--format", "jsonl", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    await _in_store(open_store, lambda s: s.delete_group(group))
    assert await _in_store(open_store, lambda s: s.count_episodes(group)) == 0
    proc = mnemobus("import", "jsonl", str(out), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = len(before.episodes) + len(before.entities) + len(before.facts)
    assert proc.stdout.strip().endswith(f"read {rows}, stored {rows}, skipped 0 (already stored), dead-lettered 0")
    _same(before, await _in_store(open_store, lambda s: s.export_group(group)))  # type: ignore[arg-type]
    again = mnemobus("import", "jsonl", str(out), env=env)
    assert again.stdout.strip().endswith(f"read {rows}, stored 0, skipped {rows} (already stored), dead-lettered 0")
