"""Keeping each group's in-memory FactGraph current with the SQLite file, across processes.

The file is the source of truth, and other processes (the extraction worker)
write it. Triggers stamp every fact row a write touches with its group's next
version (`group_versions.ver`), and a deletion moves the group's `epoch`. A
reader compares the group's (epoch, version) with its graph's: the same -> use
it; a newer version -> read only the rows stamped after it (an index range);
another epoch -> read the group again. Triggers rather than code in each write
path: every writer, including one started from an older build of mnemobus,
stamps the same way, because the rule lives in the file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mnemobus.store.fact_graph import FactGraph, FactGraphCache
from mnemobus.store.sqlite import on_loop
from mnemobus.store.sqlite.tx import immediate

# the columns that ranking, validity and the walk read; a change to any of them must reach the graphs
_WATCHED = ("subject_id, object_id, relation, edge_type, fact, confidence, valid_at, invalid_at, created_at,"
            " last_seen, retrieval_count")
_BUMP = """
  INSERT INTO group_versions(group_id, epoch, ver) VALUES (NEW.group_id, 0, 1)
    ON CONFLICT(group_id) DO UPDATE SET ver = ver + 1;
  UPDATE facts SET ver = (SELECT ver FROM group_versions WHERE group_id = NEW.group_id) WHERE rowid = NEW.rowid;
"""
VERSIONING = f"""
CREATE TABLE IF NOT EXISTS group_versions(
  group_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, ver INTEGER NOT NULL) WITHOUT ROWID;
-- on an expression only the delta read uses: a plain (group_id, ver) index was picked by the planner for
-- lookups by subject (facts_between), scanning the whole group, and made ingest 4x slower at 10k facts a group
DROP INDEX IF EXISTS facts_group_ver;
CREATE INDEX IF NOT EXISTS facts_stamped ON facts((group_id || ''), ver);
BEGIN IMMEDIATE;  -- the triggers are replaced at every open (so a file keeps this build's), never missing meanwhile
DROP TRIGGER IF EXISTS facts_stamp_insert;
DROP TRIGGER IF EXISTS facts_stamp_update;
DROP TRIGGER IF EXISTS facts_stamp_delete;
CREATE TRIGGER facts_stamp_insert AFTER INSERT ON facts BEGIN {_BUMP} END;
CREATE TRIGGER facts_stamp_update AFTER UPDATE OF {_WATCHED} ON facts BEGIN {_BUMP} END;
CREATE TRIGGER facts_stamp_delete AFTER DELETE ON facts BEGIN
  INSERT INTO group_versions(group_id, epoch, ver) VALUES (OLD.group_id, 1, 1)
    ON CONFLICT(group_id) DO UPDATE SET epoch = epoch + 1, ver = ver + 1;
END;
COMMIT;
"""
_ROW = ("SELECT id, fact, confidence, valid_at, invalid_at, created_at, last_seen, retrieval_count, subject_id,"
        " object_id, relation, edge_type FROM facts")


def add_versioning(conn: sqlite3.Connection) -> None:
    """Make a file written before versions existed versioned: its rows start at version 0 (a first read of
    a group loads every row whatever its stamp)."""
    with immediate(conn):  # two processes opening one old file: the second waits, then finds the column
        if "ver" not in {r[1] for r in conn.execute("PRAGMA table_info(facts)")}:
            conn.execute("ALTER TABLE facts ADD COLUMN ver INTEGER NOT NULL DEFAULT 0")
    conn.executescript(VERSIONING)


class GraphReader:
    """Per-group graphs for one store's reader connections; one loader per group at a time."""

    def __init__(self, budget_bytes: int, on_deleted: Callable[[str], None] = lambda group_id: None) -> None:
        self.cache = FactGraphCache(budget_bytes)
        self._on_deleted = on_deleted  # another process deleted rows of a group this one holds
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def _lock(self, group_id: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(group_id, threading.Lock())

    def current(self, conn: sqlite3.Connection, group_id: str, known: tuple[int, int] | None = None) -> FactGraph:
        """The group's graph with every change committed before this call; hold `graph.lock` while reading it.

        `known`: the group's (epoch, version) as this connection's snapshot already read it (`group_state.py`).
        """
        with on_loop.held(self._lock(group_id)):
            return self._current(conn, group_id, known)

    def _current(self, conn: sqlite3.Connection, group_id: str, known: tuple[int, int] | None) -> FactGraph:
        if known is None:
            row = conn.execute("SELECT epoch, ver FROM group_versions WHERE group_id = ?", (group_id,)).fetchone()
            known = row if row is not None else (0, 0)
        epoch, version = known
        graph = self.cache.get(group_id)
        if graph is not None and graph.epoch == epoch and graph.version >= version:
            return graph
        if on_loop.active() and version > 0:
            if graph is None or graph.epoch != epoch:
                on_loop.stall("cold")  # a whole group's graph to read: on a thread
            # every stamp moves the version by one, so the gap bounds the rows to read (a bulk import, or a flush
            # of many retrieval counts)
            on_loop.catch_up(version - graph.version)
        if graph is not None and graph.epoch != epoch:
            self._on_deleted(group_id)
        if graph is None or graph.epoch != epoch:
            # the version is read before the rows: a row committed in between is read now and again later
            graph = FactGraph(epoch, version)
            rows = conn.execute(f"{_ROW} WHERE group_id = ?", (group_id,))
        else:
            rows = conn.execute(f"{_ROW} WHERE (group_id || '') = ? AND ver > ?", (group_id, graph.version))
        with graph.lock:
            graph.put(rows.fetchall())
            graph.version = version
        self.cache.put(group_id, graph)  # again after growing: the budget is checked on put
        return graph

    def drop(self, group_id: str) -> None:
        self.cache.drop(group_id)

    def held_versions(self, conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
        """Each held group's (epoch, version) as `conn` sees it now."""
        names = list(self.cache.held())
        out: dict[str, tuple[int, int]] = {}
        for at in range(0, len(names), 500):  # under SQLite's bound on parameters
            chunk = names[at:at + 500]
            out.update((g, (e, v)) for g, e, v in conn.execute(
                f"SELECT group_id, epoch, ver FROM group_versions WHERE group_id IN ({','.join('?' * len(chunk))})",
                chunk))
        return out

    @contextmanager
    def counting(self, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                 counts: dict[str, int]) -> Iterator[list[str]]:
        """Around the commit of a write that only added `counts` to retrieval counts, moving the groups from
        `before` to `after` (both read inside that write's transaction, so nothing else came between): each held
        graph that was at `before` gets the counts in memory and is at `after` before the commit; which were is
        filled into the list yielded. Else the next recall of each group reads the ~1,000 stamped rows back
        itself: 4.5-5.5 ms of SQL and 1-3 ms of `put` at 100k facts, one recall in ~100, so the p99
        (docs/performance.md). Before, not after: a recall that sees the commit finds the graph there already,
        and none waits for the commit (holding the graphs' locks across it kept recalls waiting 10-25 ms). A
        commit that fails drops the graphs told, so their next read takes the file's counts. A graph not at
        `before` is left to its next read."""
        done: list[str] = []
        for group_id in sorted(g for g, now in after.items() if before.get(g, now) != now):
            with self._lock(group_id):
                graph = self.cache.get(group_id)
                if graph is None or (graph.epoch, graph.version) != before[group_id]:
                    continue
                with graph.lock:
                    graph.add_retrievals(counts)
                    graph.version = after[group_id][1]
                done.append(group_id)
        try:
            yield done
        except BaseException:
            for group_id in done:
                self.drop(group_id)
            raise
