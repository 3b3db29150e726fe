"""The embedded default backend: one SQLite file in WAL mode, no server (see store.py for its shape)."""

from mnemobus.store.sqlite.schema import SCHEMA_VERSION
from mnemobus.store.sqlite.store import READERS, SqliteStore
from mnemobus.store.sqlite.writes import SqliteTxn

__all__ = ["READERS", "SCHEMA_VERSION", "SqliteStore", "SqliteTxn"]
