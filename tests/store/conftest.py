"""Store fixtures: one real store per backend, fresh group ids per test.

`neo4j_uri` is the run's Neo4j: the server named by NEO4J_URI, or a local
Neo4j 5.26 started once per run by mnemobus.kernel.neo4j_shared, however many
xdist workers share it (jars fetched by Maven if missing). It never skips: a Neo4j that cannot start fails the run and
says why, so the Neo4j half of the conformance suite cannot silently vanish.

Community Edition has one database, so tests isolate by group id instead of
restarting the server (tests on other workers write beside them at the same
moment); the groups a test used are deleted afterwards.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemobus.shared.groups import GroupId, validate_group_id
from mnemobus.store.contract import GraphStore

BACKENDS = ("sqlite", "neo4j")


@pytest.fixture(scope="session")
def neo4j_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Bolt URI of a live Neo4j for this run (one server for all xdist workers); fails (never skips) when there is
    none."""
    env = os.environ.get("NEO4J_URI")
    if env:
        return env
    from mnemobus.kernel.neo4j_local import LocalNeo4jError, ensure_jars
    from mnemobus.kernel.neo4j_shared import shared_uri
    from mnemobus.kernel.testing import run_dir, run_owner_pid

    try:
        ensure_jars()
        return shared_uri(run_dir(tmp_path_factory), run_owner_pid())
    except LocalNeo4jError as exc:
        pytest.fail(f"the local Neo4j could not start (set NEO4J_URI to use another server): {exc}", pytrace=False)


@pytest.fixture
def new_group() -> Iterator[Callable[[str], GroupId]]:
    """Factory of fresh group ids (uuid-based), so tests sharing one Neo4j never see each other's data."""
    made: list[GroupId] = []

    def make(tag: str = "g") -> GroupId:
        gid = validate_group_id(f"t{tag}_{uuid.uuid4().hex[:12]}")
        made.append(gid)
        return gid

    make.made = made  # type: ignore[attr-defined]
    yield make


@pytest.fixture
def group(new_group: Callable[[str], GroupId]) -> GroupId:
    return new_group("a")


@pytest.fixture
def other_group(new_group: Callable[[str], GroupId]) -> GroupId:
    return new_group("b")


def _sqlite_store(path: Path) -> GraphStore:
    from mnemobus.store.sqlite import SqliteStore  # owned by the engine/sqlite work (issue 3)

    return SqliteStore(path)


@pytest.fixture(params=BACKENDS)
async def store(
    request: pytest.FixtureRequest, tmp_path: Path, new_group: Callable[[str], GroupId]
) -> AsyncIterator[GraphStore]:
    """An opened store of each backend; the groups the test made are deleted at teardown (Neo4j)."""
    backend = request.param
    if backend == "sqlite":
        try:
            s = _sqlite_store(tmp_path / "store.sqlite3")
        except ImportError as exc:  # pragma: no cover - until the SQLite backend lands
            pytest.skip(f"SQLite backend not importable yet: {exc}")
    else:
        from mnemobus.store.neo4j import Neo4jStore

        s = Neo4jStore(request.getfixturevalue("neo4j_uri"))
    await s.open()
    try:
        yield s
    finally:
        if backend == "neo4j":
            for gid in new_group.made:  # type: ignore[attr-defined]
                try:
                    await s.delete_group(gid)
                except Exception:  # noqa: BLE001 - cleanup must not hide the test's own failure
                    pass
        await s.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator["SqliteStore"]:
    """One opened SQLite store for a SQLite-only test."""
    from mnemobus.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "sqlite.sqlite3")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def neo(neo4j_uri: str, new_group: Callable[[str], GroupId]) -> AsyncIterator["Neo4jStore"]:
    """One Neo4j store for a Neo4j-only test; the groups the test made are deleted afterwards."""
    from mnemobus.store.neo4j import Neo4jStore

    store = Neo4jStore(neo4j_uri)
    await store.open()
    try:
        yield store
    finally:
        for gid in new_group.made:  # type: ignore[attr-defined]
            await store.delete_group(gid)
        await store.close()


@contextlib.asynccontextmanager
async def opened_neo4j(uri: str, **options: Any) -> AsyncIterator["Neo4jStore"]:
    """A Neo4jStore with these options, opened for the block and closed after it."""
    from mnemobus.store.neo4j import Neo4jStore

    store = Neo4jStore(uri, **options)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def open_neo4j(neo4j_uri: str) -> Callable[..., contextlib.AbstractAsyncContextManager["Neo4jStore"]]:
    """Opens further stores on the session's Neo4j: `async with open_neo4j(mirror_fresh_s=0) as store`."""
    return lambda **options: opened_neo4j(neo4j_uri, **options)


@pytest.fixture
async def other(neo4j_uri: str) -> AsyncIterator["Neo4jStore"]:
    """A second store on the same server: another process's writes and reads."""
    async with opened_neo4j(neo4j_uri) as store:
        yield store


@pytest.fixture
async def server_only(neo4j_uri: str, neo: "Neo4jStore") -> AsyncIterator["Neo4jStore"]:
    """A Neo4j store without group mirrors: every search and walk is a server read (`neo` deletes the groups
    afterwards)."""
    async with opened_neo4j(neo4j_uri, vector_cache_mb=None) as store:
        yield store
