"""One write transaction on a SQLite connection, rolled back only when SQLite has not already done so.

On SQLITE_FULL and some I/O errors SQLite rolls the transaction back itself;
an unconditional ROLLBACK then fails with "cannot rollback - no transaction
is active" and hides the error that mattered (a full disk) from the caller.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT; on any exception a ROLLBACK if one is still open, then the exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
