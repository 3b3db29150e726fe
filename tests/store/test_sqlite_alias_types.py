"""SqliteStore schema 3: aliases keyed by entity type, and a file from before moved over with its aliases."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Entity
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
G = GroupId("user_a")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_file_with_untyped_aliases_gets_each_alias_its_entitys_type(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    store = SqliteStore(path, dim=8)
    await store.open()
    async with store.transaction() as tx:
        await tx.insert_entity(Entity(id="e1", group_id=G, name="Jordan", canonical_name="jordan", type="person",
                                      aliases=("jo",), first_seen=datetime(2026, 1, 1, tzinfo=UTC)), None)
    await store.close()
    with sqlite3.connect(path) as raw:  # the layout before schema 3: one entity per alias, no type
        raw.executescript("""
            CREATE TABLE old(group_id TEXT NOT NULL, alias TEXT NOT NULL, entity_id TEXT NOT NULL,
                             PRIMARY KEY(group_id, alias)) WITHOUT ROWID;
            INSERT INTO old SELECT group_id, alias, entity_id FROM aliases;
            DROP TABLE aliases;
            ALTER TABLE old RENAME TO aliases;
            CREATE INDEX aliases_entity ON aliases(entity_id);
        """)
    reopened = SqliteStore(path, dim=8)
    await reopened.open()
    async with reopened.transaction() as tx:
        as_person = await tx.entity_by_alias(G, "jo", ("person",))
        as_place = await tx.entity_by_alias(G, "jordan", ("place",))
    await reopened.close()
    assert as_person is not None and as_person.id == "e1" and as_place is None
