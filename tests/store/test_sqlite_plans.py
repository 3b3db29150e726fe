"""What the SQLite store's recall reads cost, by the plans SQLite picks and the steps it runs (issue 36)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode
from mnemobus.store.sqlite import SqliteStore
from mnemobus.store.sqlite.group_state import STATE
from mnemobus.store.sqlite.store import TURNS, TURNS_PER_STATEMENT, turns_union
from test_conformance import T0  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
G = GroupId("user_turns")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _turn(i: int, channel: str, at: datetime) -> Episode:
    return Episode(id=f"{channel}-{i:05d}", group_id=G, content=f"turn {i} in {channel}", role="user",
                   source_message_id=f"{channel}-{i}", reference_time=at, channel_id=channel)


async def _store_with(path: Path, episodes: list[Episode]) -> SqliteStore:
    store = SqliteStore(path)
    await store.open()
    async with store.transaction() as txn:
        for ep in episodes:
            await txn.insert_episode(ep, screened=False, embedding=None)
    return store


def _plan(c: sqlite3.Connection, sql: str, n_params: int) -> str:
    return " | ".join(row[3] for row in c.execute(f"EXPLAIN QUERY PLAN {sql}", (None,) * n_params))


def _steps(c: sqlite3.Connection, sql: str, params: tuple) -> tuple[list, int]:
    """The rows and the number of SQLite virtual-machine steps the statement took (repeatable, unlike time)."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    c.set_progress_handler(count, 1)
    try:
        rows = c.execute(sql, params).fetchall()
    finally:
        c.set_progress_handler(None, 1)
    return rows, steps


async def test_each_side_of_the_turns_around_a_message_is_one_seek_of_its_channel(tmp_path: Path) -> None:
    store = await _store_with(tmp_path / "p.sqlite3", [])
    await store.close()
    with sqlite3.connect(tmp_path / "p.sqlite3") as c:
        for side in (-1, 1):
            plan = _plan(c, TURNS[side], 6)
            assert "USING INDEX episodes_turns" in plan and "channel_id=?" in plan and "(reference_time,id)" in plan, plan
            assert "TEMP B-TREE" not in plan, plan  # read in index order: no sort of the window


async def test_no_other_read_of_a_group_takes_the_turns_index(tmp_path: Path) -> None:
    store = await _store_with(tmp_path / "p.sqlite3", [])
    await store.close()
    with sqlite3.connect(tmp_path / "p.sqlite3") as c:
        # the vector cache's freshness check and the group counts: a plain (group_id, channel_id, ...) index was
        # taken for these and walked the whole group
        for sql in ("SELECT max(rowid) FROM episodes WHERE group_id = ?", "SELECT count(*) FROM episodes WHERE group_id = ?",
                    "SELECT 1 FROM episodes WHERE group_id = ? LIMIT 1"):
            assert "episodes_turns" not in _plan(c, sql, 1), sql


async def test_the_turns_read_costs_the_same_however_many_turns_of_another_channel_fill_the_window(
        tmp_path: Path) -> None:
    """The anchor sits in a quiet channel; a busy one fills the hour around it. The nearest turn of the quiet
    channel is found in the same number of steps with 20 or 2,000 busy turns in between."""
    costs = []
    for busy in (20, 2_000):
        quiet = [_turn(0, "quiet", T0 - timedelta(minutes=50)), _turn(1, "quiet", T0)]
        noise = [_turn(i, "busy", T0 - timedelta(minutes=45) + timedelta(seconds=i * 2700 / busy)) for i in range(busy)]
        path = tmp_path / f"busy{busy}.sqlite3"
        store = await _store_with(path, quiet + noise)
        found = await store.episode_context(G, [quiet[1].id], span=1, within_s=3600)
        assert [(n.offset, n.episode.id) for n in found] == [(-1, quiet[0].id)]
        await store.close()
        with sqlite3.connect(path) as c:
            rows, steps = _steps(c, TURNS[-1], (G, "quiet", T0.timestamp() - 3600, T0.timestamp(), quiet[1].id, 1))
        assert [r[0] for r in rows] == [quiet[0].id]
        costs.append(steps)
    assert costs[1] <= costs[0] * 1.2, costs


async def test_the_turns_of_every_anchor_read_in_one_statement_keep_each_sides_seek(tmp_path: Path) -> None:
    store = await _store_with(tmp_path / "p.sqlite3", [])
    await store.close()
    with sqlite3.connect(tmp_path / "p.sqlite3") as c:
        plan = _plan(c, turns_union(4), 4 * 6)
        assert plan.count("USING INDEX episodes_turns") == 4, plan
        assert "TEMP B-TREE" not in plan, plan
        state = " | ".join(row[3] for row in c.execute(f"EXPLAIN QUERY PLAN {STATE}", {"g": G}))
        assert "episodes_turns" not in state and "SCAN" not in state.replace("SCAN CONSTANT ROW", ""), state


async def test_more_anchors_than_one_statement_holds_still_get_their_turns(tmp_path: Path) -> None:
    turns = [_turn(i, "c1", T0 + timedelta(minutes=i)) for i in range(2 * TURNS_PER_STATEMENT + 1)]
    store = await _store_with(tmp_path / "p.sqlite3", turns)
    anchors = turns[1::2]  # TURNS_PER_STATEMENT anchors: two sides each, two statements
    found = await store.episode_context(G, [t.id for t in anchors], span=1, within_s=3600)
    await store.close()
    got = {(n.anchor_id, n.offset): n.episode.id for n in found}
    want = {(t.id, side): turns[2 * i + 1 + side].id for i, t in enumerate(anchors) for side in (-1, 1)}
    assert got == want
