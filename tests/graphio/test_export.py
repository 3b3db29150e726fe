"""`mnemobus graph export`: each format holds what the store holds, read back by an independent reader."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

from graph_support import build_josh, cli_env, mnemobus  # same folder (pytest prepend import mode)
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import GroupExport
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
GROUP = GroupId("user_josh")


@pytest.fixture
async def josh(tmp_path: Path) -> tuple[Path, GroupExport]:
    """A SQLite file holding Josh's five turns, closed again so the CLI can open it; and what it holds."""
    path = tmp_path / "m.sqlite3"
    store = SqliteStore(path)
    await store.open()
    try:
        await build_josh(store, GROUP)
        dump = await store.export_group(GROUP)
    finally:
        await store.close()
    return path, dump


async def test_graphml_export_reads_back_in_networkx_with_every_entity_and_fact(
        josh: tuple[Path, GroupExport], tmp_path: Path) -> None:
    path, dump = josh
    out = tmp_path / "josh.graphml"
    proc = mnemobus("graph", "export", GROUP, "--format", "graphml", "--out", str(out), env=cli_env(path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    graph = nx.read_graphml(out)
    assert (graph.number_of_nodes(), graph.number_of_edges()) == (len(dump.entities), len(dump.facts))
    ended = [d for _, _, d in graph.edges(data=True) if d["relation"] == "works_at"]
    assert [(d["active"], d["invalid_at"][:10]) for d in ended] == [(False, "2025-04-01")]


async def test_jsonl_export_holds_every_episode_and_fact_with_ids_and_times(josh: tuple[Path, GroupExport]) -> None:
    path, dump = josh
    proc = mnemobus("graph", "export", GROUP, "--format", "jsonl", env=cli_env(path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert rows[0] | {"exported_at": None, "mnemobus": None} == {
        "kind": "group", "format": "mnemobus-export", "v": 1, "group_id": GROUP, "exported_at": None,
        "mnemobus": None, "episodes": 5, "entities": len(dump.entities), "facts": len(dump.facts)}
    episodes = {r["id"]: r for r in rows if r["kind"] == "episode"}
    facts = {r["id"]: r for r in rows if r["kind"] == "fact"}
    assert {e.id: (e.content, e.reference_time.isoformat()) for e, _, _ in dump.episodes} == {
        i: (r["content"], r["reference_time"]) for i, r in episodes.items()}
    assert {f.id: (f.fact, f.valid_at and f.valid_at.isoformat(), f.invalid_at and f.invalid_at.isoformat(),
                   list(f.episode_ids)) for f, _ in dump.facts} == {
        i: (r["fact"], r["valid_at"], r["invalid_at"], r["episode_ids"]) for i, r in facts.items()}


async def test_mermaid_export_draws_the_active_facts_and_leaves_out_the_ended_one(
        josh: tuple[Path, GroupExport]) -> None:
    path, _ = josh
    proc = mnemobus("graph", "export", GROUP, "--format", "mermaid", env=cli_env(path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("flowchart LR\n")
    assert '-- "lives_in" -->' in proc.stdout and '["Berlin"]' in proc.stdout
    assert "works_at" not in proc.stdout and '["Acme"]' not in proc.stdout


async def test_export_of_a_group_the_store_does_not_hold_fails_naming_it(josh: tuple[Path, GroupExport]) -> None:
    path, _ = josh
    proc = mnemobus("graph", "export", "user_nobody", env=cli_env(path))
    assert proc.returncode == 1
    assert "'user_nobody' holds nothing in the sqlite store" in proc.stderr
