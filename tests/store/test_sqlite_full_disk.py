"""A write that fails because SQLite rolled the transaction back itself (a full disk) reports that failure."""

from __future__ import annotations

import sqlite3

import pytest

from mnemobus.store.sqlite.tx import immediate


def test_an_error_after_sqlite_rolled_back_by_itself_reaches_the_caller_unmasked(tmp_path) -> None:
    conn = sqlite3.connect(tmp_path / "t.sqlite3", isolation_level=None)
    conn.execute("CREATE TABLE t(x)")
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        with immediate(conn):
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("ROLLBACK")  # what SQLite does itself on SQLITE_FULL
            raise sqlite3.OperationalError("database or disk is full")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_an_error_inside_an_open_transaction_rolls_it_back(tmp_path) -> None:
    conn = sqlite3.connect(tmp_path / "t.sqlite3", isolation_level=None)
    conn.execute("CREATE TABLE t(x)")
    with pytest.raises(ValueError):
        with immediate(conn):
            conn.execute("INSERT INTO t VALUES (1)")
            raise ValueError("bad row")
    assert not conn.in_transaction and conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
