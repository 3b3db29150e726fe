"""A write never outlives the erasure of its group: each store counts every group's erasures (a count that outlives
the group), a write reads the count when it starts and checks it again inside its transaction, under the lock an
erasure takes too.

Why: erasures and writes were serialised only inside one process (api/core.GroupLocks). A worker process that had
taken an episode for a group before an API process erased the group stored it afterwards and brought part of the
group back. Now: a write that started before an erasure finishes is erased too (it commits first and the erasure
deletes it, or it finds the count changed and is dropped with `GroupErased`); a write that starts after the
erasure finishes creates the group afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mnemobus.shared.errors import MnemobusError
from mnemobus.shared.groups import GroupId


class GroupErased(MnemobusError):
    """The group was erased after this write started: the write is dropped with the group (never retried, never
    dead-lettered: the worker acks it as erased)."""

    def __init__(self, group_id: str) -> None:
        super().__init__(f"group {group_id!r} was erased after this write started; it is erased too")
        self.group_id = group_id


@runtime_checkable
class CountsErasures(Protocol):
    """A store that counts erasures (both stores do); its WriteTxn is an ErasureCheckedTxn."""

    async def erasure_counts(self, group_ids: Sequence[GroupId]) -> dict[GroupId, int]:
        """How many times each group was erased so far (0: never); committed counts, read outside a write."""


@runtime_checkable
class ErasureCheckedTxn(Protocol):
    async def check_not_erased(self, group_id: GroupId, seen: int) -> None:
        """Raise GroupErased when the group's erasure count is no longer `seen`; from here to the commit no erasure
        of the group can commit (it waits for this transaction)."""


async def erasures_seen(store: object, groups: Sequence[GroupId]) -> dict[GroupId, int] | None:
    """The counts a write starting now checks at its commit; None for a store that does not count erasures."""
    if not isinstance(store, CountsErasures) or not groups:
        return None
    return await store.erasure_counts(list(dict.fromkeys(groups)))


async def check_still_there(txn: object, group_id: GroupId, seen: dict[GroupId, int] | None) -> None:
    """GroupErased when `group_id` was erased since `seen` was read (nothing to check without counts)."""
    if seen is not None and isinstance(txn, ErasureCheckedTxn):
        await txn.check_not_erased(group_id, seen.get(group_id, 0))
