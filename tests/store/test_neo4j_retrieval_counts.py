"""Neo4j's retrieval counts are written behind the request path (store/neo4j/retrievals.py); a read through the same
store still sees every retrieval it counted, exactly once, whenever the count write happens around it."""

from __future__ import annotations

import asyncio

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore
from test_conformance import alice_graph  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def _read_beside_the_count_write(neo: Neo4jStore, group: GroupId, fact_id: str, read_first: bool) -> int:
    await neo.mark_retrieved(group, [fact_id])
    await neo.mark_retrieved(group, [fact_id])
    read = asyncio.ensure_future(neo.get_facts(group, [fact_id])) if read_first else None
    write = asyncio.ensure_future(neo.flush_retrievals())
    read = read or asyncio.ensure_future(neo.get_facts(group, [fact_id]))
    await write
    return (await read)[0].retrieval_count


@pytest.mark.parametrize("read_first", [True, False], ids=["read-then-write", "write-then-read"])
async def test_a_read_beside_this_processs_count_write_sees_each_counted_retrieval_once(
        neo: Neo4jStore, group: GroupId, read_first: bool) -> None:
    """Seen in a conformance test under load: a read that outlasted the one-second wait before the count write came
    back with neither the counts held in memory (handed to the write) nor the written ones (not yet committed)."""
    fact_id = (await alice_graph(neo, group))["facts"][0].id  # type: ignore[index]
    seen = [await _read_beside_the_count_write(neo, group, fact_id, read_first) for _ in range(5)]
    assert seen == [2, 4, 6, 8, 10]
