"""The mirror cache logic of the Neo4j store (mnemobus/store/neo4j/operations/mirroring.py): which groups are
mirrored, how a load is shared, and when a mirror is thrown away rather than caught up. How mirrored reads answer
beside other processes' writes is in test_neo4j_mirror.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import anyio
import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore
from test_conformance import T0, alice_graph, vec  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
LATER = T0 + timedelta(days=1)


# Not exclusive: warming takes the groups the shared Neo4j saw written last, which other workers write too, so it
# is scoped to this test's groups (`groups_prefix`)
async def test_warming_mirrors_the_most_recently_written_groups_up_to_the_number_asked(
        open_neo4j: Callable[..., Any], neo: Neo4jStore, new_group: Callable[[str], GroupId]) -> None:
    mine = f"warm{uuid.uuid4().hex[:8]}"
    older, newer = new_group(mine), new_group(mine)
    await alice_graph(neo, older)
    await alice_graph(neo, newer)
    async with open_neo4j() as fresh:
        warmed = await fresh.warm(1, f"t{mine}_")
        assert (warmed, newer in fresh._mirrors, older in fresh._mirrors) == ([newer], True, False)


async def test_reads_of_a_group_not_mirrored_yet_share_one_load(
        open_neo4j: Callable[..., Any], neo: Neo4jStore, group: GroupId) -> None:
    await alice_graph(neo, group)
    async with open_neo4j() as fresh:
        loads = 0
        load = fresh._load_mirror

        async def counted(group_id: str) -> Any:
            nonlocal loads
            loads += 1
            return await load(group_id)

        fresh._load_mirror = counted  # type: ignore[method-assign]
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(fresh._loaded_within, group, None)
        assert (loads, group in fresh._mirrors) == (1, True)


async def test_a_group_whose_rows_were_deleted_elsewhere_is_loaded_afresh_not_caught_up(
        open_neo4j: Callable[..., Any], neo: Neo4jStore, group: GroupId) -> None:
    await alice_graph(neo, group)
    assert await neo.preload(group)
    before = neo._mirrors.get(group)
    async with open_neo4j() as other:
        await other.delete_group(group)
        await alice_graph(other, group)
    hits = await neo.search_facts_vector(group, vec("Alice works at Acme"), LATER, 1)
    loading = neo._mirror_loads.get(group)
    if loading is not None:  # a search waits MIRROR_WAIT_S for the load, then asks the server: on a busy machine
        await loading        # the new mirror lands after the answer (fresh-clone CI with four workers)
    after = neo._mirrors.get(group)
    assert (after is not None and after is not before, after.epoch != before.epoch, len(hits)) == (True, True, 1)


async def test_a_write_of_this_process_makes_the_next_read_ask_for_the_version(
        neo: Neo4jStore, group: GroupId) -> None:
    await alice_graph(neo, group)
    assert await neo.preload(group)
    mirror = neo._mirrors.get(group)
    confirmed = mirror.checked_at
    with neo._committing([group]):
        pass
    assert (await neo._mirror(group, confirm=False)) is mirror and mirror.checked_at > confirmed
