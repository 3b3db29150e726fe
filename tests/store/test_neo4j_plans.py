"""The Neo4j statements read what they answer: an index seek into the group, not a scan of everyone's rows.

Counted as the entries the plan's index and label operators read (PROFILE db hits: work, not time), on a group
of 1,200 episodes beside another of 1,200, so a statement that scans shows it and one that seeks does not.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from neo4j import AsyncDriver, AsyncGraphDatabase

from mnemobus.shared.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.neo4j.cypher import EPISODE_CONTEXT
from mnemobus.store.neo4j.mirror import PAGE

pytestmark = pytest.mark.anyio
EPISODES = 6000  # one a minute, two channels


@pytest.fixture
async def driver(neo4j_uri: str) -> AsyncIterator[AsyncDriver]:
    drv = AsyncGraphDatabase.driver(neo4j_uri, auth=None, notifications_min_severity="OFF")
    try:
        yield drv
    finally:
        await drv.close()


@pytest.fixture
async def two_groups(neo: Neo4jStore, driver: AsyncDriver,
                     new_group: Callable[[str], GroupId]) -> tuple[GroupId, GroupId]:
    """Two groups of episodes written straight to the server (the store deletes them afterwards)."""
    groups = (new_group("plan"), new_group("other"))
    for g in groups:
        await driver.execute_query(
            "UNWIND range(0, $n - 1) AS i CREATE (:Episode {id: $g + ':' + toString(i), group_id: $g, ver: i, "
            "channel_id: 'c' + toString(i % 2), content: 'hello', "
            "reference_time: datetime('2026-01-01T00:00:00Z') + duration({seconds: i * 60})})", g=g, n=EPISODES)
    await driver.execute_query("CALL db.awaitIndexes(300)")
    return groups


async def rows_read(driver: AsyncDriver, query: str, **params: Any) -> int:
    """Entries read by the plan's index seeks and scans and label scans, the part that grows with the store. Planned
    afresh on the data just written (`replan=force`): the run's Neo4j keeps a cached plan up to a minute
    (kernel/neo4j_shared.py), and PROFILE shares the plain statement's cache entry, which another test may have
    planned on other data."""
    async with driver.session() as session:
        result = await session.run("PROFILE CYPHER replan=force " + query, params)
        summary = await result.consume()

    def total(plan: dict[str, Any]) -> int:
        op = plan["operatorType"]
        own = int(plan.get("dbHits", 0)) if "Index" in op or "Scan" in op else 0
        return own + sum(total(c) for c in plan.get("children", []))

    assert summary.profile is not None
    return total(summary.profile)


async def test_reading_one_groups_episodes_seeks_the_group(driver: AsyncDriver,
                                                           two_groups: tuple[GroupId, GroupId]) -> None:
    g, _ = two_groups
    read = await rows_read(driver, "MATCH (n:Episode {group_id: $g}) RETURN count(n) AS c", g=g)
    assert read <= EPISODES + 10, read  # a scan of the label reads both groups and more


async def test_the_turns_around_a_message_read_a_bounded_range(driver: AsyncDriver,
                                                               two_groups: tuple[GroupId, GroupId]) -> None:
    g, _ = two_groups
    anchor = f"{g}:{EPISODES - 100}"  # late in the group: an unbounded "before" reads the ~1,100 turns before it
    read = await rows_read(driver, EPISODE_CONTEXT, ids=[anchor], g=g, span=1, within=3600)
    assert read < 400, read  # the hour either side of it holds ~120 turns


async def test_a_mirror_page_reads_its_own_rows(driver: AsyncDriver, two_groups: tuple[GroupId, GroupId]) -> None:
    g = max(two_groups)  # the one later in index order: a scan from the index's start reads the other group too
    read = await rows_read(driver, PAGE["episode"], g=g, v=EPISODES // 2, id="", k=100)
    assert read < 300, read  # the page's 100 rows and the seek's own reads


async def test_the_runs_neo4j_plans_a_cached_statement_again_at_most_once_a_minute(driver: AsyncDriver) -> None:
    """Its database grows from nothing during the run: at Neo4j's default (10 s) it planned its statements again
    ~once a second (kernel/neo4j_shared.py), which is why the tests above ask for a fresh plan."""
    if os.environ.get("NEO4J_URI"):
        pytest.skip("NEO4J_URI names a server of yours, configured by you")
    records, _, _ = await driver.execute_query(
        "SHOW SETTINGS YIELD name, value WHERE name = 'dbms.cypher.min_replan_interval' RETURN value")
    assert [r["value"] for r in records] == ["1m"]  # REPLAN_EACH_MINUTE's 60s, as the server writes it


def cached_plans(message: str) -> int:
    """The number in `db.clearQueryCaches()`'s answer: 'Query caches successfully cleared of N queries.'"""
    return int(message.rsplit(" of ", 1)[1].split()[0])


@pytest.mark.exclusive  # it empties the server's plan cache and counts it: no other test's statements may be in it
async def test_the_runs_neo4j_plans_a_statement_once_whatever_the_size_of_its_lists(driver: AsyncDriver) -> None:
    """At Neo4j's default a statement is planned again for each size class of a list parameter (1, 10, 100 ...
    items); a worker's batches and a recall's reads vary in size all the time, and each plan of a long statement
    cost a cold server 0.1-1 s of CPU (FEW_PLANS in kernel/neo4j_local.py)."""
    if os.environ.get("NEO4J_URI"):
        pytest.skip("NEO4J_URI names a server of yours, configured by you")
    await driver.execute_query("CALL db.clearQueryCaches()")
    for size in (1, 5, 50, 500):
        await driver.execute_query("UNWIND $ids AS id RETURN count(id) AS how_many_plans", ids=list(range(size)))
    records, _, _ = await driver.execute_query("CALL db.clearQueryCaches()")
    assert cached_plans(records[0]["value"]) == 1, records[0]["value"]
