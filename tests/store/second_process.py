"""The store a second OS process of a test opens (erasure_writer.py, promoter.py): the same file or server as the
test's own store, named on the command line as `<sqlite|neo4j> <file or bolt uri>`."""

from __future__ import annotations

from pathlib import Path

from mnemobus.store.contract import GraphStore


def store_at(backend: str, where: str) -> GraphStore:
    if backend == "sqlite":
        from mnemobus.store.sqlite import SqliteStore

        return SqliteStore(Path(where))
    from mnemobus.store.neo4j import Neo4jStore

    return Neo4jStore(where, ensure_schema=False)
