"""What a recall needs to know about a group before it reads it, in one statement instead of seven.

Each read of a recall asked the file one small question first: the fact graph
its group's version, each vector matrix the newest rowid of its table, each
full-text search whether the group has a row in its table. Seven statements a
group, seven for a group that holds nothing (the user's old platform group
usually holds nothing). Inside `run_reads` one read transaction serves the
whole recall, so the answers cannot change during it: they are read once per
group and run (`SqliteStore._state`), and an empty group costs that one
statement and no other.

The same statement counts the group's promoted memories (an index seek): most groups hold none, and the read
of them that every enriched request made (a thread hop and a statement) is skipped for those. The count is
read from the file in the recall's own snapshot, so a promotion or a delete by any process is seen by the next
recall, with no mark to keep in step.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

# the same subqueries the reads asked one at a time, so each keeps its plan (max(rowid) by the group index)
STATE = (
    "SELECT (SELECT epoch FROM group_versions WHERE group_id = :g), (SELECT ver FROM group_versions WHERE group_id = :g),"
    " (SELECT max(rowid) FROM facts WHERE group_id = :g), (SELECT max(rowid) FROM entities WHERE group_id = :g),"
    " (SELECT max(rowid) FROM episodes WHERE group_id = :g),"
    " (SELECT count(*) FROM promoted WHERE group_id = :g)"
)


@dataclass(frozen=True, slots=True)
class GroupState:
    """A group as one snapshot sees it: its fact graph's (epoch, version) and each table's newest rowid."""

    epoch: int
    version: int
    newest: dict[str, int | None]  # table -> max(rowid) of the group's rows; None: the group has none there
    promoted: int = 0  # the group's promoted memories

    def has_rows(self, table: str) -> bool:
        return self.newest[table] is not None


def read_state(c: sqlite3.Connection, group_id: str) -> GroupState:
    epoch, version, facts, entities, episodes, promoted = c.execute(STATE, {"g": group_id}).fetchone()
    return GroupState(epoch or 0, version or 0, {"facts": facts, "entities": entities, "episodes": episodes},
                      promoted)
