"""The groups a Neo4j database holds are the groups mnemobus wrote, whatever else shares the database."""

from __future__ import annotations

import uuid

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.neo4j.rows import run_rows
from test_conformance import alice_graph  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio


async def test_a_node_without_a_group_is_not_listed_as_a_group(neo: Neo4jStore, group: GroupId) -> None:
    """Seen in a parallel run: group_ids() listed None, and the lifecycle tests' teardown, which erases every group
    listed, failed on it (a scheduled upkeep pass walks the same list)."""
    await alice_graph(neo, group)
    stray = uuid.uuid4().hex
    await neo._write(lambda tx: run_rows(tx, "CREATE (:Entity {uuid: $u, name: 'written by another tool'})", {"u": stray}))
    try:
        listed = await neo.group_ids()
        assert group in listed and None not in listed
    finally:
        await neo._write(lambda tx: run_rows(tx, "MATCH (n:Entity {uuid: $u}) DELETE n", {"u": stray}))
