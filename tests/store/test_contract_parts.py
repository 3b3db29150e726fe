"""The store contract in parts (mnemobus/store/contract.py): each caller needs one of reads, writes, erasure and
admin; a backend is the union, so a new one can be built part by part against the conformance suite."""

from __future__ import annotations

import inspect

from mnemobus.store.contract import GraphStore, StoreAdmin, StoreErasure, StoreReads, StoreWrites
from mnemobus.store.neo4j import Neo4jStore  # type: ignore[attr-defined]
from mnemobus.store.sqlite import SqliteStore

PARTS = (StoreReads, StoreWrites, StoreErasure, StoreAdmin)


def _methods(protocol: type) -> set[str]:
    return {n for n, v in vars(protocol).items() if inspect.isfunction(v) and not n.startswith("_")}


def test_every_method_of_the_whole_store_is_in_exactly_one_part() -> None:
    owners = [n for part in PARTS for n in _methods(part)]
    whole = {n for n in dir(GraphStore) if inspect.isfunction(getattr(GraphStore, n)) and not n.startswith("_")}
    assert (sorted(owners) == sorted(set(owners)), set(owners)) == (True, whole)


def test_the_whole_store_adds_no_method_of_its_own() -> None:
    assert _methods(GraphStore) == set()


def test_both_backends_implement_every_part() -> None:
    missing = {(backend.__name__, part.__name__): sorted(m for m in _methods(part) if not hasattr(backend, m))
               for backend in (SqliteStore, Neo4jStore) for part in PARTS}
    assert {k: v for k, v in missing.items() if v} == {}
