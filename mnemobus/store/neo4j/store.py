"""The Neo4j store: connection and schema, mirrors, reads, write transactions, retrieval counts, deletes, export."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, NotificationMinimumSeverity
from neo4j import exceptions as nx

from mnemobus.shared.errors import StoreIntegrityError, StoreUnavailable
from mnemobus.store.neo4j.coalesce import CoalescedReads
from mnemobus.store.neo4j.cypher import SCHEMA, TRANSIENT
from mnemobus.store.neo4j.episodes import EpisodeReads
from mnemobus.store.neo4j import erasure
from mnemobus.store.neo4j.communities import COMMUNITY_SCHEMA, Neo4jCommunities
from mnemobus.store.neo4j.deletes import Deletes
from mnemobus.store.neo4j.export import Export
from mnemobus.store.neo4j.fetches import Fetches
from mnemobus.store.neo4j.lifecycle import Neo4jLifecycle
from mnemobus.store.neo4j.mirror import GroupMirror, MirrorCache
from mnemobus.store.neo4j.mirroring import Mirroring
from mnemobus.store.neo4j.retrievals import Retrievals
from mnemobus.store.neo4j.rows import run_rows
from mnemobus.store.neo4j.search import Search
from mnemobus.store.neo4j.tuning import EMBEDDING_DIM, ERASURE_LEASE_S, MIN_VERSION, MIRROR_FRESH_S, WRITE_TIMEOUT_S
from mnemobus.store.neo4j.writes import Writes

log = logging.getLogger(__name__)
T = TypeVar("T")


class Neo4jStore(Neo4jLifecycle, Neo4jCommunities, Mirroring, EpisodeReads, Deletes, Writes, Search, Fetches, Retrievals,
                 Export, CoalescedReads):
    """GraphStore on Neo4j 5.18+ (5.26 LTS tested), over the async driver."""

    name = "neo4j"

    def __init__(
        self,
        uri: str,
        *,
        user: str | None = None,
        password: str | None = None,
        database: str | None = None,
        connect_timeout_s: float = 30.0,
        max_retry_time_s: float = 5.0,
        ensure_schema: bool = True,
        coalesce_reads: bool = True,
        dim: int = EMBEDDING_DIM,
        vector_cache_mb: int | None = 512,
        write_timeout_s: float = WRITE_TIMEOUT_S,
        mirror_fresh_s: float = MIRROR_FRESH_S,
        erasure_lease_s: float = ERASURE_LEASE_S,
    ) -> None:
        """`ensure_schema=False` skips creating constraints and indexes at open: for a database whose
        schema an administrator manages (the connecting user may lack schema rights), and for
        throw-away servers in fault tests, where creating 14 indexes is most of the set-up time.

        `vector_cache_mb` bounds the in-process group mirrors (see mirror.py; None: no mirrors,
        every search and walk asks the server). `mirror_fresh_s`: how long a confirmed group version
        is trusted by a walk without asking again (vector searches always ask; see `walk`). `erasure_lease_s`:
        how long a journalled erasure this store started stays its own after each batch (erasure.py)."""
        self.ensure_schema = ensure_schema
        self.uri = uri
        self._auth = (user, password or "") if user else None
        self.database = database
        self.connect_timeout_s = connect_timeout_s
        self.max_retry_time_s = max_retry_time_s
        self._driver: AsyncDriver | None = None
        self._write_lock = asyncio.Lock()
        self._deadlock_observers: list[Callable[[str], None]] = []  # see Writes.observe_deadlocks
        self.erasure_owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.erasure_lease_s = erasure_lease_s
        self._shares: dict[tuple[str, str], tuple[float, int, int]] = {}
        self.server_version: tuple[int, ...] = ()
        self.coalesce_reads = coalesce_reads
        self._queued: list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any], int]] = []
        self.read_lanes = True
        self._tasks: set[asyncio.Task[Any]] = set()
        self._refreshing: set[tuple[str, str]] = set()
        # retrieval counts not yet written: (group, fact id) -> count (see mark_retrieved)
        self._retrievals: dict[tuple[str, str], int] = {}
        self._retrieval_task: asyncio.Task[None] | None = None
        self._counting: dict[str, asyncio.Event] = {}  # group -> set once this process's count write is answered
        self._count_writes = 0  # count writes begun or answered so far (a read that spans one reads again)
        self.dim = dim
        self.mirror_fresh_s = mirror_fresh_s
        self._mirrors = MirrorCache(dim, vector_cache_mb * 2**20) if vector_cache_mb else None
        self._version_reads: dict[str, tuple[asyncio.Future[Any], float]] = {}  # queued, not yet sent
        self._mirror_loads: dict[str, asyncio.Task[GroupMirror | None]] = {}
        self._catching_up: dict[str, asyncio.Lock] = {}
        self._too_big: dict[str, float] = {}  # group -> monotonic time until which it is not mirrored
        self.write_timeout_s = write_timeout_s  # a write transaction's server-side bound, lock waits included
        self._crowded_observers: list[Callable[[str], None]] = []  # see Mirroring.observe_vector_cache_crowded
        self._promoted_marks: dict[str, tuple[bool, float]] = {}  # group -> (holds promoted, asked at), see lifecycle

    @classmethod
    def from_settings(cls, settings: Any, *, dim: int = EMBEDDING_DIM, vector_cache_mb: int | None = 512) -> Neo4jStore:
        """Build from `StoreSettings.neo4j` (uri, user, password, database) and `StoreSettings.vector_cache_mb`."""
        pw = settings.password.get_secret_value() if settings.password is not None else None
        return cls(settings.uri, user=settings.user, password=pw, database=settings.database, dim=dim,
                   vector_cache_mb=vector_cache_mb, erasure_lease_s=settings.erasure_lease_s)

    async def open(self) -> None:
        """Connect (retrying with backoff while Neo4j is starting or down), check the version, create the schema."""
        if self._driver is not None:
            return
        driver = AsyncGraphDatabase.driver(
            self.uri, auth=self._auth, max_transaction_retry_time=self.max_retry_time_s,
            connection_acquisition_timeout=10.0, connection_timeout=5.0,
            # no server notifications: they are advice for people writing queries at a console
            # (the `CALL { WITH x ... }` form is deprecated from 5.23 but is the only one 5.18-5.22
            # accept; "property key does not exist" fires on every query of a young database),
            # and the driver logs each one as a warning, on the hot path
            notifications_min_severity=NotificationMinimumSeverity.OFF,
        )
        deadline = time.monotonic() + self.connect_timeout_s
        delay = 0.2
        last: Exception | None = None
        while True:
            try:
                await driver.verify_connectivity()
                break
            except nx.AuthError as exc:
                await driver.close()
                raise StoreUnavailable(f"Neo4j at {self.uri} refused the credentials: {exc.message}") from exc
            except TRANSIENT as exc:
                last = exc
            # the last wait is cut to the deadline and tried once more there: giving up as soon as the next full
            # backoff would overshoot ended a 1.5 s wait after 0.78 s on a slow machine, saying "within 2 s"
            left = deadline - time.monotonic()
            if left <= 0:
                await driver.close()
                raise StoreUnavailable(
                    f"Neo4j at {self.uri} did not answer within {self.connect_timeout_s:g} s "
                    f"(last error: {type(last).__name__}: {last}); is the server running?"
                )
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 5.0)
        try:
            await self._check_version(driver)
            if self.ensure_schema:
                await self._ensure_schema(driver)
        except BaseException:
            await driver.close()
            raise
        self._driver = driver
        await self._finish_erasure()

    async def _finish_erasure(self) -> None:
        """An erasure a process left part-way is finished before this one serves anything (erasure.py)."""
        try:
            await erasure.resume(self)  # type: ignore[arg-type]
        except Exception:
            await self.close()
            raise

    async def _check_version(self, driver: AsyncDriver) -> None:
        records, _, _ = await driver.execute_query(
            "CALL dbms.components() YIELD name, versions RETURN name, versions[0] AS v", database_=self.database
        )
        raw = next((r["v"] for r in records if r["name"] == "Neo4j Kernel"), records[0]["v"] if records else "0")
        nums = tuple(int(x) for x in re.findall(r"\d+", raw)[:3])
        self.server_version = nums
        if nums[:2] < MIN_VERSION:
            raise StoreIntegrityError(
                f"Neo4j at {self.uri} is version {raw}; mnemobus needs 5.18 or newer because "
                "relationship vector indexes and vector.similarity.cosine arrived in 5.18"
            )

    async def _ensure_schema(self, driver: AsyncDriver) -> None:
        """Create missing constraints and indexes (idempotent; one listing query when all exist)."""
        have: set[str] = set()
        for q in ("SHOW CONSTRAINTS YIELD name", "SHOW INDEXES YIELD name"):
            records, _, _ = await driver.execute_query(q, database_=self.database)
            have.update(r["name"] for r in records)
        if "mb_alias_key" in have:  # aliases keyed without the entity's type: give each its type, then re-key
            async with driver.session(database=self.database) as session:  # IN TRANSACTIONS: auto-commit only
                await (await session.run(
                    "MATCH (a:Alias) WHERE a.type IS NULL OPTIONAL MATCH (a)-[:ALIAS_OF]->(e:Entity) "
                    "CALL { WITH a, e SET a.type = coalesce(e.type, 'thing') } IN TRANSACTIONS OF 10000 ROWS")).consume()
            await driver.execute_query("DROP CONSTRAINT mb_alias_key IF EXISTS", database_=self.database)
        missing = [q for q in (*SCHEMA, *COMMUNITY_SCHEMA) if re.search(r"(?:CONSTRAINT|INDEX) (\w+)", q).group(1) not in have]  # type: ignore[union-attr]
        for q in missing:
            try:
                await driver.execute_query(q, database_=self.database)
            except nx.ClientError as exc:
                # another process created an equivalent one between our listing and now
                if "EquivalentSchemaRule" not in (exc.code or "") and "already exists" not in (exc.message or ""):
                    raise StoreIntegrityError(f"creating schema failed: {q}: {exc.message}") from exc
        if missing:
            await driver.execute_query("CALL db.awaitIndexes(300)", database_=self.database)

    async def close(self) -> None:
        task, self._retrieval_task = self._retrieval_task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass  # as asked: its work is finished just below
            except Exception as exc:  # noqa: BLE001 - closing goes on; the counts are flushed just below
                log.warning("the retrieval-count flusher had failed: %s", exc)
        if self._driver is not None:
            try:
                await self.flush_retrievals()
            except StoreUnavailable:
                pass  # the server is gone: counts not yet written are lost, as documented
        for t in list(self._tasks):
            t.cancel()
        self._tasks.clear()
        for queued in self._queued:
            fut = queued[3]
            if not fut.done():
                fut.set_exception(StoreUnavailable("the Neo4j store was closed"))
        self._queued = []
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def ping(self) -> None:
        await self._read(lambda tx: run_rows(tx, "RETURN 1 AS one"))

    def _open_driver(self) -> AsyncDriver:
        if self._driver is None:
            raise StoreUnavailable("the Neo4j store is not open")
        return self._driver

    async def _read(self, fn: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        try:
            async with self._open_driver().session(database=self.database) as s:
                return await s.execute_read(fn)
        except TRANSIENT as exc:
            raise StoreUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}") from exc

    async def _write(self, fn: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T:
        try:
            async with self._open_driver().session(database=self.database) as s:
                return await s.execute_write(fn)
        except nx.ConstraintError as exc:
            raise StoreIntegrityError(f"Neo4j refused the write: {exc.message}") from exc
        except TRANSIENT as exc:
            raise StoreUnavailable(f"Neo4j write failed: {type(exc).__name__}: {exc}") from exc
