"""Promoted memories come with a recall, read only for groups that hold some (issue 36), on both stores.

Every enriched request read the promoted memories of its groups (issue 39): a thread hop and a statement on
SQLite, a round trip on Neo4j, for groups that nearly always hold none. The recall's own reads now say which
groups hold some (SQLite: the group's state statement counts them; Neo4j: the version read asks), so the others
are skipped. A promotion or a delete in ANOTHER process must still be seen by the very next recall.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import RecallQuery, RecallResult
from test_conformance import alice_graph  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio

PROMOTER = Path(__file__).with_name("promoter.py")


def _where(store: GraphStore) -> tuple[str, str]:
    return (store.name, str(store.path)) if store.name == "sqlite" else (store.name, store.uri)  # type: ignore[attr-defined]


async def _in_another_process(store: GraphStore, group: GroupId, action: str, memory_id: str) -> None:
    done = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [sys.executable, str(PROMOTER), *_where(store), group, action, memory_id],
        capture_output=True, text=True, timeout=120))
    assert done.returncode == 0, done.stderr


class Counted:
    """The store's promoted reads, counted (the one read both stores make for promoted memories)."""

    def __init__(self, store: GraphStore) -> None:
        self.reads = 0
        read: Callable[..., Awaitable[Any]] = store.promoted_of  # type: ignore[attr-defined]

        async def counted(*a: Any, **k: Any) -> Any:
            self.reads += 1
            return await read(*a, **k)

        store.promoted_of = counted  # type: ignore[attr-defined]


async def _recall(engine: MemoryEngine, *groups: GroupId, recipe: str = "hybrid") -> RecallResult:
    return await engine.recall(RecallQuery("Where does Alice work?", groups, promoted=5, sessions=("c1",),
                                           recipe=recipe))


async def _until_skipped(engine: MemoryEngine, counted: Counted, *groups: GroupId) -> None:
    """Recall until one makes no promoted read (Neo4j: once the groups are mirrored, their version reads say)."""
    with anyio.fail_after(60):
        while True:
            before = counted.reads
            assert (await _recall(engine, *groups)).promoted == ()
            if counted.reads == before:
                return
            await anyio.sleep(0.05)


async def test_a_recall_of_groups_holding_no_promoted_memory_reads_none(
        store: GraphStore, group: GroupId, other_group: GroupId) -> None:
    await alice_graph(store, group)
    await alice_graph(store, other_group)
    engine = MemoryEngine(store, embedder=HashEmbedder())
    counted = Counted(store)
    await _until_skipped(engine, counted, group, other_group)
    before = counted.reads
    result = await _recall(engine, group, other_group)
    assert result.facts and result.promoted == ()  # the recall itself ran, and found no promoted memory
    assert counted.reads == before


async def test_a_promotion_in_another_process_is_seen_by_the_next_recall(
        store: GraphStore, group: GroupId, other_group: GroupId) -> None:
    await alice_graph(store, group)
    await alice_graph(store, other_group)
    engine = MemoryEngine(store, embedder=HashEmbedder())
    await _until_skipped(engine, Counted(store), group, other_group)  # this process holds "none" for both groups
    await _in_another_process(store, other_group, "add", "p-fridays")
    (seen,) = (await _recall(engine, group, other_group)).promoted
    assert (seen.id, seen.group_id, seen.text) == ("p-fridays", other_group, "Ship on Fridays")


async def test_neo4j_a_recall_that_reads_no_group_version_does_not_go_by_an_earlier_recall(
        open_neo4j: Callable[..., Any], group: GroupId) -> None:
    """Neo4j learns "none" from version reads; a recall that reads no version (the text recipe searches no
    vectors, and its mirror was confirmed within `mirror_fresh_s`) must not skip on what an earlier one learned."""
    async with open_neo4j(mirror_fresh_s=600.0) as neo:
        try:
            await alice_graph(neo, group)
            engine = MemoryEngine(neo, embedder=HashEmbedder())
            await _until_skipped(engine, Counted(neo), group)
            await _in_another_process(neo, group, "add", "p-text")
            assert [m.id for m in (await _recall(engine, group, recipe="text")).promoted] == ["p-text"]
        finally:
            await neo.delete_group(group)


async def test_a_delete_in_another_process_is_seen_by_the_next_recall(
        store: GraphStore, group: GroupId) -> None:
    await alice_graph(store, group)
    engine = MemoryEngine(store, embedder=HashEmbedder())
    await _in_another_process(store, group, "add", "p-gone")
    assert [m.id for m in (await _recall(engine, group)).promoted] == ["p-gone"]
    await _in_another_process(store, group, "delete", "p-gone")
    assert (await _recall(engine, group)).promoted == ()
