"""Finding and mending a damaged SQLite store: the file's own pages, and the full-text indexes beside the rows.

Why this exists: builds before 2026-11-29 ran FTS5 'optimize' after every erasure, which on SQLite 3.40 put the
index a level deeper each time and made it unreadable after ~1,200 erasures ("database disk image is malformed",
docs/performance.md). A full-text index is derived from rows its own table keeps, so it can always be rebuilt
without losing anything; the file's own b-tree pages cannot be mended in place.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from mnemobus.store.contract import Damage
from mnemobus.store.sqlite.tx import immediate

FULL_TEXT = ("facts_fts", "entities_fts", "episodes_fts")
_CORRUPT, _NOT_A_DATABASE = 11, 26  # SQLite's primary result codes; extended ones (CORRUPT_VTAB 267) share the low byte
REPAIR_HINT = ("the store's file is damaged; `mnemobus doctor` says which part, and `mnemobus doctor --repair` "
               "rebuilds a damaged full-text index from its rows")
MAX_FILE_PROBLEMS = 5  # quick_check lists up to 100 lines; the first few name the damage
PATIENT_S = 60.0  # how long a check or a repair waits for a running worker's write to end before it says busy


def damaged(exc: sqlite3.Error) -> bool:
    """Whether SQLite refused because what it read is damaged: no wait or retry changes that answer."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (_CORRUPT, _NOT_A_DATABASE)


def damage_hint(exc: sqlite3.Error) -> str:
    """What to do about a damaged read: a file SQLite cannot read at all is no store a repair could start from."""
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF == _NOT_A_DATABASE:
        return ("the file is not a SQLite database, or its first page is damaged: check store.sqlite_path "
                "(MNEMOBUS_STORE__SQLITE_PATH), or restore a backup")
    return REPAIR_HINT


def file_damage(conn: sqlite3.Connection) -> list[Damage]:
    """The file's b-trees, page by page (SQLite's quick_check): a read, so any connection will do."""
    try:
        lines = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.DatabaseError as exc:
        if not damaged(exc):
            raise
        lines = [str(exc)]
    return [] if lines == ["ok"] else [Damage("file", "; ".join(lines[:MAX_FILE_PROBLEMS]), repairable=False)]


def text_index_damage(conn: sqlite3.Connection) -> list[Damage]:
    """Each full-text index checked against the rows it indexes (FTS5's integrity-check). The check is a command
    written as an INSERT, so it runs in a write transaction on the writer's connection, one index at a time."""
    found = []
    for table in FULL_TEXT:
        try:
            with immediate(conn):
                conn.execute(f"INSERT INTO {table}({table}) VALUES('integrity-check')")
        except sqlite3.DatabaseError as exc:
            if not damaged(exc):
                raise
            found.append(Damage(table, f"the full-text index of {table.removesuffix('_fts')} is damaged ({exc})",
                                repairable=True))
    return found


@contextmanager
def patient(conn: sqlite3.Connection, restore_s: float) -> Iterator[sqlite3.Connection]:
    """The connection waiting up to PATIENT_S for another writer's lock, then back to `restore_s`: doctor runs
    beside a live pipeline, whose worker holds the lock a batch at a time, longer than the store's usual wait."""
    conn.execute(f"PRAGMA busy_timeout={int(PATIENT_S * 1000)}")
    try:
        yield conn
    finally:
        conn.execute(f"PRAGMA busy_timeout={int(restore_s * 1000)}")


def rebuild_text_indexes(conn: sqlite3.Connection, tables: tuple[str, ...] = FULL_TEXT) -> None:
    """Each full-text index made again from the rows it holds, in the caller's write transaction."""
    for table in tables:
        if table not in FULL_TEXT:
            raise ValueError(f"not a full-text index of this store: {table!r}")
        conn.execute(f"INSERT INTO {table}({table}) VALUES('rebuild')")
