"""A second process promoting or deleting a promoted memory (test_promoted_in_recall.py).

    python promoter.py <sqlite|neo4j> <file or bolt uri> <group> <add|delete> <memory id>
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import anyio

from mnemobus.shared.groups import GroupId
from second_process import store_at  # same folder: the script's own directory is on sys.path
from mnemobus.store.lifecycle import Promoted


async def main(backend: str, where: str, group: str, action: str, memory_id: str) -> None:
    store = store_at(backend, where)
    await store.open()
    try:
        if action == "add":
            await store.add_promoted(Promoted(id=memory_id, group_id=GroupId(group), kind="decision", scope="user",
                                              text="Ship on Fridays", author="josh", created_at=datetime.now(UTC)))
        else:
            assert await store.delete_promoted(GroupId(group), memory_id)
    finally:
        await store.close()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
