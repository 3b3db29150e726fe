"""The Neo4j store: connection and schema, mirrors, reads, write transactions, retrieval counts, deletes, export."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np
from neo4j import (READ_ACCESS, AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, AsyncResult,
                   NotificationMinimumSeverity, Query, unit_of_work)
from neo4j import exceptions as nx

from mnemobus.shared.errors import StoreIntegrityError, StoreUnavailable
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import DeleteCounts, EntityLinks, Hit, Prefetch, Step, Vector, side_by_side
from mnemobus.store.model import EdgeType, Entity, Episode, Fact, GroupExport, Neighbour
from mnemobus.store.neo4j.communities import COMMUNITY_SCHEMA, DELETE_GROUP_COMMUNITIES, Neo4jCommunities
from mnemobus.store.neo4j.coalesce import LANE_ANN, CoalescedReads
from mnemobus.store.neo4j.cypher import (BUMP_VERSIONS, COUNT_RETRIEVALS, ENTITY_FACTS, ENTITY_MENTIONS, EPISODE_CONTEXT, FACT_RETURN, NEW_EPOCH,
                                         NODE_ENTITY_MAP, NODE_EPISODE_MAP, NODE_SEARCH, RECENT_GROUPS,
                                         RESET_RETRIEVALS, SCHEMA, TRANSIENT, VALID_AT, VERSION_OF, VERSION_QUERY,
                                         NodeSearch)
from mnemobus.store.neo4j.mirror import (DELTA, KINDS, LOAD_COLUMNS, PAGE, SIZES, UNSTAMPED, GroupMirror,
                                         MirrorCache)
from mnemobus.store.neo4j.rows import (as_float_list, cosine_score, drop_facts, entity_from_row, entity_params,
                                       episode_from_row, epoch_us, fact_from_row, fact_params, group_key,
                                       lost_a_lock_race, lucene_terms, run_rows, utc_or_none)
from mnemobus.store.neo4j.tuning import (ANN_MAX, ANN_OVERSAMPLE, EMBEDDING_DIM, EXACT_SCAN_MAX,
                                         LOAD_FETCH, LOAD_PAGE, LOAD_PAGE_TIMEOUT_S, LOAD_TIMEOUT_S, LOCK_RETRIES,
                                         MIN_VERSION, MIRROR_FRESH_S, MIRROR_TOO_BIG_S, MIRROR_WAIT_S,
                                         OWN_WRITE_WAIT_S, RETRIEVAL_BACKLOG, RETRIEVAL_FLUSH_S,
                                         RETRIEVAL_WRITE_TIMEOUT_S, SHARE_TTL_S)
from mnemobus.store.neo4j import erasure
from mnemobus.store.neo4j.write_txn import Neo4jWriteTxn, SplitBatch
from mnemobus.store.neo4j.lifecycle import Neo4jLifecycle

log = logging.getLogger(__name__)
T = TypeVar("T")
P = TypeVar("P")


class Neo4jStore(Neo4jLifecycle, CoalescedReads, Neo4jCommunities):
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
        mirror_fresh_s: float = MIRROR_FRESH_S,
    ) -> None:
        """`ensure_schema=False` skips creating constraints and indexes at open: for a database whose
        schema an administrator manages (the connecting user may lack schema rights), and for
        throw-away servers in fault tests, where creating 14 indexes is most of the set-up time.

        `vector_cache_mb` bounds the in-process group mirrors (see mirror.py; None: no mirrors,
        every search and walk asks the server). `mirror_fresh_s`: how long a confirmed group version
        is trusted by a walk without asking again (vector searches always ask; see `walk`)."""
        self.ensure_schema = ensure_schema
        self.uri = uri
        self._auth = (user, password or "") if user else None
        self.database = database
        self.connect_timeout_s = connect_timeout_s
        self.max_retry_time_s = max_retry_time_s
        self._driver: AsyncDriver | None = None
        self._write_lock = asyncio.Lock()
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
        self.dim = dim
        self.mirror_fresh_s = mirror_fresh_s
        self._mirrors = MirrorCache(dim, vector_cache_mb * 2**20) if vector_cache_mb else None
        self._version_reads: dict[str, tuple[asyncio.Future[Any], float]] = {}  # queued, not yet sent
        self._mirror_loads: dict[str, asyncio.Task[GroupMirror | None]] = {}
        self._catching_up: dict[str, asyncio.Lock] = {}
        self._too_big: dict[str, float] = {}  # group -> monotonic time until which it is not mirrored

    @classmethod
    def from_settings(cls, settings: Any, *, dim: int = EMBEDDING_DIM, vector_cache_mb: int | None = 512) -> Neo4jStore:
        """Build from `StoreSettings.neo4j` (uri, user, password, database) and `StoreSettings.vector_cache_mb`."""
        pw = settings.password.get_secret_value() if settings.password is not None else None
        return cls(settings.uri, user=settings.user, password=pw, database=settings.database, dim=dim,
                   vector_cache_mb=vector_cache_mb)

    # -- lifecycle ------------------------------------------------------------

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
            if time.monotonic() + delay > deadline:
                await driver.close()
                raise StoreUnavailable(
                    f"Neo4j at {self.uri} did not answer within {self.connect_timeout_s:.0f} s "
                    f"(last error: {type(last).__name__}: {last}); is the server running?"
                )
            await asyncio.sleep(delay)
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
            await erasure.resume(self)
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

    # -- plumbing ---------------------------------------------------------------

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

    # -- in-process mirrors (see mirror.py) ------------------------------------------------

    async def _group_version(self, group_id: str) -> tuple[str | None, int, float]:
        """(epoch, version, when asked) of the group, read in the statement of the reads queued beside it.

        Reads of one event-loop turn share one version read: it is sent after all of them were
        issued, so its answer is at least as new as each of them needs.
        """
        shared = self._version_reads.get(group_id) if self.coalesce_reads else None
        if shared is None:
            shared = (self._enqueue(VERSION_QUERY, ("e", "v"), 0, {"g": group_id}), time.monotonic())
            if self.coalesce_reads:
                self._version_reads[group_id] = shared
        rows = await asyncio.shield(shared[0])
        return rows[0]["e"], int(rows[0]["v"]), shared[1]

    async def _mirror(self, group_id: str, *, confirm: bool, load: bool = True,
                      known: tuple[str | None, int] | None = None) -> GroupMirror | None:
        """The group's mirror, caught up with the group's current version; None when the server must answer.

        `confirm`: ask for the version now (vector searches, which share the read with the full-text
        queries of their round). Otherwise a version confirmed within `mirror_fresh_s` will do (a
        walk: the second round of a recall, whose first round has just confirmed it), so writes of
        other processes reach a walk at most that late. This process's own writes mark the mirror
        unconfirmed at commit. A group not mirrored starts loading in the background; the server
        answers until it is loaded (a small group loads within MIRROR_WAIT_S and is used at once);
        `load=False`: a group not mirrored yet is answered by the server without starting a load.
        `known`: the group's (epoch, version) read just now under its write lock, which stands in for the
        version read (nobody else commits to the group before the lock is released).
        """
        if self._mirrors is None:
            return None
        mirror = self._mirrors.get(group_id)
        if mirror is None and load:
            mirror = await self._loaded_within(group_id, MIRROR_WAIT_S)
        if mirror is None:
            return None
        if not confirm and time.monotonic() - mirror.checked_at <= self.mirror_fresh_s:
            return mirror
        epoch, version, asked = (*known, time.monotonic()) if known else await self._group_version(group_id)
        if epoch != mirror.epoch:  # rows were deleted (or the group's first version was written): reload
            self._mirrors.drop(group_id)
            if not load:
                return None
            mirror = await self._loaded_within(group_id, MIRROR_WAIT_S)
            if mirror is None or mirror.epoch != epoch:
                return None
        counting = self._counting.get(group_id)
        if version > mirror.version and counting is not None:
            # this process's retrieval counts are being written: when the version read saw them committed,
            # they reach the mirror with the write's answer, which is on its way (see _own_counts_written)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(counting.wait(), OWN_WRITE_WAIT_S)
        if version > mirror.version:
            try:
                await self._catch_up(group_id, mirror, version)
            except Exception as exc:  # noqa: BLE001 - the server answers; the next read loads the group afresh
                log.warning("catching up the mirror of group %s failed: %s", group_id, exc, exc_info=True)
                self._mirrors.drop(group_id)
                return None
        if asked >= mirror.written_at:  # a read issued before this process's last write confirms nothing
            mirror.checked_at = max(mirror.checked_at, asked)
        return mirror

    async def _catch_up(self, group_id: str, mirror: GroupMirror, version: int) -> None:
        """Apply the rows stamped after the mirror's version: the three kinds in one statement."""
        async with self._catching_up.setdefault(group_id, asyncio.Lock()):
            if mirror.version >= version:
                return
            since = mirror.version
            found = await asyncio.gather(*(self._shared_read(DELTA[k], LOAD_COLUMNS[k], g=group_id, since=since) for k in KINDS))
            for kind, rows in zip(KINDS, found, strict=True):
                mirror.apply(kind, rows)
            mirror.version = max(mirror.version, version)  # rows newer than `version` are applied again later
        mirror.maintain_indexes(background=True)
        if self._mirrors is not None and not self._mirrors.evict():
            self._too_big[group_id] = time.monotonic() + MIRROR_TOO_BIG_S

    async def _loaded_within(self, group_id: str, timeout_s: float | None) -> GroupMirror | None:
        """Start loading the group's mirror (unless it is loading) and wait for it at most timeout_s."""
        if self._too_big.get(group_id, 0.0) > time.monotonic():
            return None
        task = self._mirror_loads.get(group_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load_mirror(group_id))
            self._mirror_loads[group_id] = task
            self._tasks.add(task)
            task.add_done_callback(lambda t: (self._tasks.discard(t), self._mirror_loads.pop(group_id, None)))
        await asyncio.wait({task}, timeout=timeout_s)  # never cancels the load
        return task.result() if task.done() and not task.cancelled() else None

    async def _load_mirror(self, group_id: str) -> GroupMirror | None:
        """Read the whole group into a new mirror: stamped rows a page (one record) at a time, then any rows
        written before versions existed, LOAD_FETCH a fetch. Pages are small enough that decoding one never
        holds the event loop long.

        The version is read first: rows written meanwhile are newer than it and read again by the next catch-up
        (a row updated while the pages pass is read at its new version, by a later page or the catch-up).
        """
        assert self._mirrors is not None
        budget = self._mirrors.budget

        def too_big() -> None:
            self._too_big[group_id] = time.monotonic() + MIRROR_TOO_BIG_S
            log.warning("group %s needs more than store.vector_cache_mb: not mirrored", group_id)

        try:
            rows = await self._read_rows(VERSION_QUERY, g=group_id)  # unconfirmed: this process may write while it loads
            mirror = GroupMirror(self.dim, rows[0]["e"], int(rows[0]["v"]))
            async with self._open_driver().session(database=self.database, default_access_mode=READ_ACCESS,
                                           fetch_size=LOAD_FETCH) as s:
                result = await s.run(Query(SIZES, timeout=LOAD_PAGE_TIMEOUT_S), {"g": group_id})
                sizes = await result.single(strict=True)
                if sum(sizes.values()) * self.dim * 4 > budget:  # the embeddings alone
                    return too_big()
                for kind in KINDS:
                    mirror.tables[kind].reserve(int(sizes[kind]))
                for kind in KINDS:
                    cols = LOAD_COLUMNS[kind]

                    async def page_after(ver: int, row_id: str, kind: str = kind) -> AsyncResult:
                        return await s.run(Query(PAGE[kind], timeout=LOAD_PAGE_TIMEOUT_S),
                                           {"g": group_id, "v": ver, "id": row_id, "k": LOAD_PAGE})

                    result = await page_after(-1, "")
                    while True:
                        page = (await result.single(strict=True))["rows"]
                        full = len(page) == LOAD_PAGE
                        if full:  # the server reads the next page while this one is applied
                            result = await page_after(page[-1][1], page[-1][0])  # after this (ver, id)
                        mirror.apply(kind, [dict(zip(cols, row, strict=True)) for row in page])
                        if mirror.nbytes > budget:
                            return too_big()
                        if not full:
                            break
                    result = await s.run(Query(UNSTAMPED[kind], timeout=LOAD_TIMEOUT_S), {"g": group_id})
                    batch: list[dict[str, Any]] = []
                    async for record in result:
                        batch.append(dict(record))
                        if len(batch) >= LOAD_FETCH:
                            mirror.apply(kind, batch)
                            batch = []
                            if mirror.nbytes > budget:
                                return too_big()
                    mirror.apply(kind, batch)
        except Exception as exc:  # noqa: BLE001 - a mirror is an optimisation: the server answers meanwhile
            log.warning("loading the mirror of group %s failed (the server answers meanwhile): %s", group_id, exc)
            return None
        if not self._mirrors.put(group_id, mirror):
            self._too_big[group_id] = time.monotonic() + MIRROR_TOO_BIG_S
            return None
        mirror.maintain_indexes(background=True)
        return mirror

    async def preload(self, group_id: GroupId, *, wait_for_indexes: bool = True) -> bool:
        """Mirror the group now (benchmarks, tests, a service warming its busiest groups); True when it is held."""
        if self._mirrors is None:
            return False
        if group_id not in self._mirrors:
            await self._loaded_within(group_id, None)
        mirror = await self._mirror(group_id, confirm=True)
        if mirror is None:
            return False
        mirror.maintain_indexes(background=True)
        while wait_for_indexes and any(t.building for t in mirror.tables.values()):
            await asyncio.sleep(0.05)
        return True

    async def warm(self, max_groups: int) -> list[GroupId]:
        """Mirror the most recently written groups (by their version node's time), until `max_groups` or until the
        mirrors fill nine tenths of store.vector_cache_mb; the groups mirrored. Their vector indexes build in
        the background. Once at start, off the request path."""
        if self._mirrors is None or max_groups <= 0:
            return []
        rows = await self._read_rows(RECENT_GROUPS, k=max_groups)
        warmed: list[GroupId] = []
        for row in rows:
            if self._mirrors.held_bytes() >= 0.9 * self._mirrors.budget:
                break
            if await self.preload(GroupId(row["g"]), wait_for_indexes=False):
                warmed.append(GroupId(row["g"]))
        return warmed

    def _mark_written(self, groups: Iterable[str]) -> None:
        """Committed writes of this process: the next read of each group confirms its version first."""
        if self._mirrors is not None:
            now = time.monotonic()
            for g in groups:
                self._mirrors.stale(g, now)

    async def _mirror_search(self, kind: str, group_id: GroupId, vector: Vector, k: int,
                             as_of: datetime | None = None) -> list[Hit] | None:
        """Nearest rows from the group's mirror; None when it is not mirrored (the caller asks the server)."""
        if k <= 0:
            return []
        mirror = await self._mirror(group_id, confirm=True)
        if mirror is None:
            return None
        valid = mirror.facts.valid_at_time(epoch_us(as_of)) if as_of is not None else None
        found = mirror.tables[kind].search(np.asarray(vector, dtype=np.float32), k, valid)
        return [Hit(i, s) for i, s in found]

    # -- episodes -----------------------------------------------------------------

    async def get_episode(self, group_id: GroupId, episode_id: str) -> Episode | None:
        rows = await self._read_rows(
            f"MATCH (n:Episode {{id: $id, group_id: $g}}) RETURN {NODE_EPISODE_MAP} AS n", id=episode_id, g=group_id
        )
        return episode_from_row(rows[0]["n"]) if rows else None

    async def episodes(self, group_id: GroupId, last_n: int = 10) -> list[Episode]:
        rows = await self._read_rows(
            f"MATCH (n:Episode {{group_id: $g}}) RETURN {NODE_EPISODE_MAP} AS n "
            "ORDER BY n.reference_time DESC, n.created_at DESC, n.id LIMIT $k",
            g=group_id, k=int(last_n),
        )
        return [episode_from_row(r["n"]) for r in rows]

    async def count_episodes(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._read_rows("MATCH (n:Episode) RETURN count(n) AS c")
        else:
            rows = await self._read_rows("MATCH (n:Episode {group_id: $g}) RETURN count(n) AS c", g=group_id)
        return int(rows[0]["c"])

    async def count_screened(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._read_rows("MATCH (n:Episode) WHERE n.screened RETURN count(n) AS c")
        else:
            rows = await self._read_rows("MATCH (n:Episode {group_id: $g}) WHERE n.screened RETURN count(n) AS c", g=group_id)
        return int(rows[0]["c"])

    async def get_episodes(self, group_id: GroupId, episode_ids: Sequence[str]) -> list[Episode]:
        """From the group's mirror when it holds every episode asked (see `get_facts`), else from the server."""
        if not episode_ids:
            return []
        mirror = await self._mirror(group_id, confirm=False, load=False)
        held = mirror.episode_records(episode_ids) if mirror is not None else None
        if held is not None:
            return [episode_from_row({**r, "group_id": group_id}) for r in held]
        rows = await self._shared_read(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (n:Episode {id: $ids[i], group_id: $g}) "
            f"RETURN {NODE_EPISODE_MAP} AS n ORDER BY i", ("n",),
            ids=list(episode_ids), g=group_id,
        )
        return [episode_from_row(r["n"]) for r in rows]

    async def episode_context(self, group_id: GroupId, episode_ids: Sequence[str], *, span: int,
                              within_s: float) -> list[Neighbour]:
        """From the group's mirror when it holds every episode named (see `get_episodes`), else from the server."""
        ids = list(dict.fromkeys(episode_ids))
        if not ids or span <= 0:
            return []
        mirror = await self._mirror(group_id, confirm=False, load=False)
        held = mirror.episode_context(ids, span, within_s) if mirror is not None else None
        if held is not None:
            return [Neighbour(a, o, episode_from_row({**r, "group_id": group_id})) for a, o, r in held]
        rows = await self._shared_read(EPISODE_CONTEXT, ("a", "o", "n"), ids=ids, g=group_id, span=int(span),
                                       within=float(within_s))
        return [Neighbour(r["a"], int(r["o"]), episode_from_row(r["n"])) for r in rows]

    async def delete_fact(self, group_id: GroupId, fact_id: str) -> DeleteCounts:
        async def work(tx: AsyncManagedTransaction) -> DeleteCounts:
            dropped = await drop_facts(tx, group_id, [fact_id])
            if dropped:
                await run_rows(tx, NEW_EPOCH, {"g": group_id})  # another fact may be valid again: mirrors reload
            return DeleteCounts(facts=dropped)

        counts = await self._write(work)
        if counts.facts:
            self._mark_written([group_id])
        return counts

    async def erase_residue(self) -> None:
        """Nothing a client can do: deleted records stay in Neo4j's store files and transaction logs until the
        server reuses the space or rotates the logs (db.checkpoint is Enterprise-only). docs/api.md says so."""

    async def delete_groups(self, group_ids: Sequence[GroupId]) -> DeleteCounts:
        """All or nothing: in one transaction when the groups fit, else journalled and finished (erasure.py)."""
        return await erasure.erase(self, group_ids)

    async def delete_group(self, group_id: GroupId) -> DeleteCounts:
        return await erasure.erase(self, [group_id])

    async def erasure_counts(self, group_ids: Sequence[GroupId]) -> dict[GroupId, int]:
        return await erasure.erasure_counts(self, group_ids)

    def forget_groups(self, group_ids: Iterable[str]) -> None:
        """Drop what this process holds of the groups (retrieval counts not yet written, mirrors): they are erased."""
        gone = set(group_ids)
        for key in [k for k in self._retrievals if k[0] in gone]:
            del self._retrievals[key]
        if self._mirrors is not None:
            for g in gone:
                self._mirrors.drop(g)

    async def delete_episode(self, group_id: GroupId, episode_id: str) -> DeleteCounts:
        """Forget one episode (a user's "delete that message"), in one transaction.

        The episode leaves every fact's provenance; a fact left with no source
        goes, and the facts it had superseded become valid again (the
        contradiction came from the forgotten episode). An entity the episode
        mentioned goes once no episode mentions it and no fact names it, with
        its aliases. Finding the sourced facts scans the group's facts (no
        index over a list property): deletions are rare, recall is not.
        """

        async def work(tx: AsyncManagedTransaction) -> DeleteCounts:
            p = {"g": group_id, "ep": episode_id}
            if not await run_rows(tx, "MATCH (n:Episode {id: $ep, group_id: $g}) RETURN n.id AS id", p):
                return DeleteCounts()
            await run_rows(tx, NEW_EPOCH, p)  # facts go and others become valid again: mirrors reload the group
            sourced = await run_rows(
                tx,
                "MATCH ()-[r:FACT {group_id: $g}]->() WHERE $ep IN coalesce(r.episode_ids, []) "
                "WITH r, [i IN range(0, size(r.episode_ids) - 1) WHERE r.episode_ids[i] <> $ep] AS keep "
                "WITH r, [i IN keep | r.episode_ids[i]] AS eps, [i IN keep | r.source_message_ids[i]] AS sms "
                "SET r.episode_ids = eps, r.source_message_ids = sms "
                "RETURN r.id AS id, size(eps) = 0 AS orphan",
                p,
            )
            orphans = [r["id"] for r in sourced if r["orphan"]]
            await drop_facts(tx, group_id, orphans)
            gone = await run_rows(
                tx,
                "MATCH (ep:Episode {id: $ep, group_id: $g}) "
                "OPTIONAL MATCH (ep)-[:MENTIONS]->(e:Entity {group_id: $g}) "
                "WITH ep, collect(DISTINCT e) AS mentioned DETACH DELETE ep "
                "WITH mentioned UNWIND mentioned AS e "
                "WITH e WHERE NOT EXISTS { (e)<-[:MENTIONS]-(:Episode) } AND NOT EXISTS { (e)-[:FACT]-() } "
                "OPTIONAL MATCH (a:Alias {group_id: $g})-[:ALIAS_OF]->(e) "
                "WITH e, collect(a) AS aliases FOREACH (a IN aliases | DETACH DELETE a) DETACH DELETE e "
                "RETURN count(*) AS c",
                p,
            )
            return DeleteCounts(episodes=1, entities=int(gone[0]["c"]) if gone else 0, facts=len(orphans))

        counts = await self._write(work)
        self._mark_written([group_id])
        return counts

    @asynccontextmanager
    async def _write_txn(self) -> AsyncIterator[Neo4jWriteTxn]:
        """An explicit transaction behind a WriteTxn: flushed and committed on normal exit, rolled back otherwise.

        The caller holds the write lock. Committed groups' mirrors are marked unconfirmed.
        """
        try:
            async with self._open_driver().session(database=self.database) as s:
                tx = await s.begin_transaction()
                wtx = Neo4jWriteTxn(tx, self._with_pending,
                                     lambda g, known, load: self._mirror(g, confirm=True, known=known, load=load))
                try:
                    yield wtx
                    await wtx.flush()
                except BaseException:
                    try:
                        await tx.rollback()
                    except TRANSIENT:
                        pass  # the server drops an unfinished transaction when the connection goes
                    raise
                await tx.commit()
        except nx.ConstraintError as exc:
            raise StoreIntegrityError(f"Neo4j refused the write: {exc.message}") from exc
        except TRANSIENT as exc:
            raise StoreUnavailable(f"Neo4j write failed, nothing stored: {type(exc).__name__}: {exc}") from exc
        self._mark_written(wtx.groups)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Neo4jWriteTxn]:
        """One explicit transaction for one episode: committed on normal exit, rolled back otherwise."""
        async with self._write_lock:
            async with self._write_txn() as wtx:
                yield wtx

    async def run_transactions(self, works: Sequence[Callable[[Neo4jWriteTxn], Awaitable[T]]],
                               prefetch: Prefetch | None = None) -> list[T | Exception]:
        """Every work atomic on its own, the batch in one transaction with one commit (contract: BatchTransactions).

        Why: the commit is most of an episode's cost on Neo4j (index updates and the log force
        happen there). Neo4j has no savepoints, so a failing work is isolated in one of two ways.
        While all it wrote is still queued in the WriteTxn (the usual case: the queue is sent at
        the end), its rows are dropped and the batch goes on. When some of them were already sent
        (a read made the queue flush), or the batch's final flush is refused (an integrity error
        belongs to some work), the transaction is rolled back and every work not yet failed runs
        again in a transaction of its own, so only the bad one fails. A store failure fails every
        slot, as the contract asks; episodes are idempotent by id, so the caller's retry is safe.

        The transaction first locks the groups `prefetch` names and reads what it names (one round trip
        each, see Neo4jWriteTxn.prefetch). A batch that lost a deadlock to another writer (a group it had
        not named locked out of order) is run again, at most LOCK_RETRIES times.
        """
        if not works:
            return []
        failed: dict[int, Exception] = {}
        async with self._write_lock:
            for attempt in range(LOCK_RETRIES + 1):
                failed.clear()
                try:
                    done = await self._one_transaction(works, failed, prefetch)
                    break
                except StoreUnavailable as exc:
                    if attempt == LOCK_RETRIES or not lost_a_lock_race(exc):
                        return [exc for _ in works]
                    log.info("a batch of %d writes lost a deadlock to another writer; running it again", len(works))
                    await asyncio.sleep(0.01 * 2**attempt)
        if done is not None:
            return done
        log.warning("a batch of %d writes was rolled back (%d failed on their own); running each in its own "
                    "transaction so only the bad one fails", len(works), len(failed))
        out: list[T | Exception] = []
        for i, work in enumerate(works):
            if i in failed:
                out.append(failed[i])
                continue
            result: T | Exception
            try:
                async with self.transaction() as txn:
                    result = await work(txn)
            except Exception as exc:  # noqa: BLE001 - returned in the work's slot
                result = exc
            out.append(result)
        return out

    async def _one_transaction(self, works: Sequence[Callable[[Neo4jWriteTxn], Awaitable[T]]],
                               failed: dict[int, Exception], prefetch: Prefetch | None) -> list[T | Exception] | None:
        """The batch in one transaction; None when it was rolled back and must be split (`failed`: works that failed alone)."""
        results: list[T | Exception] = []
        try:
            async with self._write_txn() as wtx:
                if prefetch is not None:
                    await wtx.prefetch(prefetch)
                for i, work in enumerate(works):
                    mark = wtx.mark()
                    try:
                        results.append(await work(wtx))
                    except (StoreUnavailable, *TRANSIENT):
                        raise
                    except Exception as exc:  # noqa: BLE001 - the work's own failure
                        if not wtx.rewind(mark):
                            raise SplitBatch from exc
                        failed[i] = exc
                        results.append(exc)
        except (SplitBatch, StoreIntegrityError):
            return None
        return results

    # -- candidate queries ------------------------------------------------------------

    async def search_facts_text(self, group_id: GroupId, terms: Sequence[str], as_of: datetime, limit: int) -> list[Hit]:
        """Lucene top hits, bounded by the index's own limit, then filtered to facts valid at as_of.

        The index cannot filter on time, so it is asked for 4x the hits wanted; when
        validity filtering leaves too few and the index had more to give, it is asked
        again for 10x as many, so the answer never depends on the over-fetch factor.
        """
        q = lucene_terms(terms)
        k = int(limit)
        if not q or k <= 0:
            return []
        fetch = max(4 * k, 50)
        while True:
            rows = await self._shared_read(
                "CALL db.index.fulltext.queryRelationships('mb_fact_text', $q, {limit: $fetch}) "
                "YIELD relationship AS r, score WITH collect([r, score]) AS hits "
                "RETURN size(hits) AS raw, [h IN hits WHERE h[0].group_id = $g "
                "AND (h[0].valid_at IS NULL OR h[0].valid_at <= $as_of) "
                "AND (h[0].invalid_at IS NULL OR $as_of < h[0].invalid_at) | [h[0].id, h[1]]][..$k] AS rows",
                ("raw", "rows"), q=f"+gk:{group_key(group_id)} +({q})", g=group_id, as_of=utc_or_none(as_of), k=k, fetch=fetch,
            )
            raw, hits = rows[0]["raw"], rows[0]["rows"]
            if len(hits) >= k or raw < fetch:
                return [Hit(i, float(sc)) for i, sc in hits]
            fetch *= 10

    async def _group_share(self, kind: str, count_q: str, total_q: str, group_id: GroupId) -> tuple[int, int]:
        """(rows of the group, rows of the store) in one vector index, refreshed every SHARE_TTL_S.

        Why: the vector index spans every group, so how many neighbours to ask it for
        depends on the group's share of it. Counting is index-backed but not free (tens of
        ms at 100k rows), and the share moves slowly: a figure up to a minute old sizes a
        fetch well enough, so an expired one is still used while a background count
        replaces it, and only a group never counted waits for its count.
        """
        key = (kind, group_id)
        hit = self._shares.get(key)
        if hit is None:
            return await self._count_share(key, count_q, total_q)
        if time.monotonic() - hit[0] >= SHARE_TTL_S and key not in self._refreshing:
            self._refreshing.add(key)
            task = asyncio.get_running_loop().create_task(self._count_share(key, count_q, total_q))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return hit[1], hit[2]

    async def _count_share(self, key: tuple[str, str], count_q: str, total_q: str) -> tuple[int, int]:
        try:
            rows = await self._shared_read(f"CALL {{ {count_q} }} CALL {{ {total_q} }} RETURN c, t", ("c", "t"), g=key[1])
        except StoreUnavailable:
            if key in self._shares:  # a background refresh: the old figure stays
                return self._shares[key][1], self._shares[key][2]
            raise
        finally:
            self._refreshing.discard(key)
        share = (int(rows[0]["c"]), int(rows[0]["t"]))
        if len(self._shares) > 10_000:
            self._shares.clear()
        self._shares[key] = (time.monotonic(), *share)
        return share

    async def search_facts_vector(self, group_id: GroupId, vector: Vector, as_of: datetime, limit: int) -> list[Hit]:
        """From the group's mirror when it is held (see `_mirror`), else from the server."""
        found = await self._mirror_search("fact", group_id, vector, int(limit), as_of)
        if found is not None:
            return found
        params = {"g": group_id, "v": as_float_list(vector), "as_of": utc_or_none(as_of), "k": int(limit)}
        exact = (
            "MATCH ()-[r:FACT {group_id: $g}]->() WHERE r.embedding IS NOT NULL AND " + VALID_AT + " "
            "WITH r, vector.similarity.cosine(r.embedding, $v) AS s ORDER BY s DESC, r.id LIMIT $k "
            "RETURN r.id AS id, s"
        )
        ann = (
            "CALL db.index.vector.queryRelationships('mb_fact_vec', $n, $v) YIELD relationship AS r, score "
            "WHERE r.group_id = $g AND " + VALID_AT + " WITH r ORDER BY score DESC LIMIT $k2 "
            "WITH r, vector.similarity.cosine(r.embedding, $v) AS s RETURN r.id AS id, s ORDER BY s DESC, r.id LIMIT $k"
        )
        return await self._vector_search(
            "fact", exact, ann, params,
            "MATCH ()-[r:FACT {group_id: $g}]->() RETURN count(r) AS c",
            "MATCH ()-[r:FACT]->() RETURN count(r) AS t",
        )

    async def _vector_search(
        self, kind: str, exact: str, ann: str, params: dict[str, Any], count_q: str, total_q: str
    ) -> list[Hit]:
        """Bounded nearest-neighbour search inside one group.

        A small group is scanned exactly (cheap, and exactly the embedded store's
        answer), and so is a group too small a share of the index for a bounded
        ANN query to reach its members. A large one asks the shared HNSW index for
        k neighbours scaled by the inverse of the group's share, so about 3k of
        them are the group's; if filtering still leaves fewer than k, the exact
        scan answers instead.
        Only the best 2k of the index's (possibly quantized) scores are rescored
        exactly: reading every candidate's 3 KiB embedding back was the slowest
        part of a recall at 100k facts.
        """
        k = params["k"]
        if k <= 0:
            return []
        in_group, total = await self._group_share(kind, count_q, total_q, params["g"])
        n = max(ANN_OVERSAMPLE * k * total // max(in_group, 1), 50)
        if in_group <= EXACT_SCAN_MAX + 2 * n or n > ANN_MAX:
            # small, or too small a share of the index for its neighbours to be found there
            rows = await self._shared_read(exact, ("id", "s"), **params)
            return [Hit(r["id"], cosine_score(r["s"])) for r in rows]
        rows = await self._shared_read(ann, ("id", "s"), lane=LANE_ANN, n=n, k2=2 * k, **params)
        if len(rows) < k:
            rows = await self._shared_read(exact, ("id", "s"), **params)
        return [Hit(r["id"], cosine_score(r["s"])) for r in rows]

    async def search_entities_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._node_text_search(NODE_SEARCH["entity"], group_id, terms, limit)

    async def search_entities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        return await self._node_vector_search(NODE_SEARCH["entity"], group_id, vector, limit)

    async def search_episodes_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._node_text_search(NODE_SEARCH["episode"], group_id, terms, limit)

    async def search_episodes_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        return await self._node_vector_search(NODE_SEARCH["episode"], group_id, vector, limit)

    async def _node_text_search(self, q: NodeSearch, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        words = lucene_terms(terms)
        if not words or limit <= 0:
            return []
        rows = await self._shared_read(q.text, ("id", "score"), q=f"+gk:{group_key(group_id)} +({words})",
                                       g=group_id, k=int(limit))
        return [Hit(r["id"], float(r["score"])) for r in rows]

    async def _node_vector_search(self, q: NodeSearch, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        found = await self._mirror_search(q.kind, group_id, vector, int(limit))
        if found is not None:
            return found
        params = {"g": group_id, "v": as_float_list(vector), "k": int(limit)}
        return await self._vector_search(q.kind, q.exact, q.ann, params, q.count, q.total)

    async def entity_links(self, group_id: GroupId, entity_ids: Sequence[str], *, as_of: datetime,
                           per_entity: int) -> EntityLinks:
        """Mentions from the server; facts from the group's mirror when held (as `walk`), else the server, in
        the same round trip."""
        ids = list(dict.fromkeys(entity_ids))
        if not ids or per_entity <= 0:
            return EntityLinks()
        mirror = await self._mirror(group_id, confirm=False)
        at = utc_or_none(as_of)
        reads = [self._shared_read(ENTITY_MENTIONS, ("e", "eps", "n"), ids=ids, g=group_id, as_of=at, k=per_entity)]
        if mirror is None:
            reads.append(self._shared_read(ENTITY_FACTS, ("e", "fs", "n"), ids=ids, g=group_id, as_of=at,
                                           k=per_entity))
        found = await asyncio.gather(*reads)
        if mirror is not None:
            facts, fact_degree = mirror.facts.around(ids, epoch_us(as_of), per_entity)
        else:
            facts = [(f[0], r["e"], f[1], float(f[2])) for r in found[1] for f in r["fs"]]
            fact_degree = {r["e"]: int(r["n"]) for r in found[1]}
        return EntityLinks(mentions=tuple((r["e"], ep) for r in found[0] for ep in r["eps"]), facts=tuple(facts),
                           mention_degree={r["e"]: int(r["n"]) for r in found[0]}, fact_degree=fact_degree)

    async def walk(
        self,
        group_id: GroupId,
        entity_ids: Sequence[str],
        *,
        as_of: datetime,
        max_hops: int,
        relations: Sequence[str] | None = None,
        edge_types: Sequence[EdgeType] | None = None,
        limit: int = 50,
    ) -> list[Step]:
        """Breadth-first; each hop's facts by confidence then id, as the embedded store orders them.

        From the group's mirror when it is held and confirmed within `mirror_fresh_s` (no round
        trip), else one server query per hop. Ids, confidences and endpoint ids only: the rows are
        read by `get_facts` for the few kept.
        """
        mirror = await self._mirror(group_id, confirm=False)
        if mirror is not None:
            steps = mirror.facts.walk(list(entity_ids), epoch_us(as_of), max_hops, relations, edge_types, int(limit))
            return [Step(fid, hop, conf) for fid, hop, conf in steps]
        seen_facts: set[str] = set()
        visited: set[str] = set(entity_ids)
        frontier = list(dict.fromkeys(entity_ids))
        out: list[Step] = []
        for hop in range(1, max_hops + 1):
            if not frontier or len(out) >= limit:
                break
            rows = await self._shared_read(
                "UNWIND $front AS eid MATCH (a:Entity {id: eid, group_id: $g})-[r:FACT {group_id: $g}]-(:Entity) "
                f"WHERE {VALID_AT} AND ($rels IS NULL OR r.relation IN $rels) "
                "AND ($types IS NULL OR r.edge_type IN $types) AND NOT r.id IN $seen "
                "WITH DISTINCT r ORDER BY r.confidence DESC, r.id LIMIT $k "
                "RETURN r.id AS id, r.confidence AS c, r.subject_id AS s, r.object_id AS o", ("id", "c", "s", "o"),
                # only what can still be returned: if this hop fills the limit the walk ends here,
                # and otherwise every fact of the hop is returned and expands the frontier
                front=frontier, g=group_id, k=int(limit) - len(out), as_of=utc_or_none(as_of), seen=list(seen_facts),
                rels=list(relations) if relations else None,
                types=list(edge_types) if edge_types else None,
            )
            nxt: list[str] = []
            for x in rows:
                fid = x["id"]
                if fid in seen_facts:
                    continue
                seen_facts.add(fid)
                if len(out) < limit:
                    out.append(Step(fid, hop, float(x["c"])))
                for e in (x["s"], x["o"]):
                    if e not in visited:
                        visited.add(e)
                        nxt.append(e)
            frontier = nxt
        return out[:limit]

    # -- fetches -------------------------------------------------------------------------

    async def run_reads(self, work: Callable[[Neo4jStore, P], Awaitable[T]], prepare: Callable[[], P]) -> T:
        """`prepare` (embedding the query) on a worker thread, then the reads on this loop, where they coalesce."""
        prepared = await anyio.to_thread.run_sync(prepare)
        return await work(self, prepared)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """Side by side: reads issued in one turn share a round trip (see coalesce.py)."""
        return await side_by_side(calls)

    async def fact_standings(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Fact]:
        """Whole facts: from the mirror they cost no more than standings, and recall need not read them again."""
        return await self.get_facts(group_id, fact_ids)

    async def get_facts(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Fact]:
        """From the group's mirror when it holds every fact asked and was confirmed within `mirror_fresh_s`
        (as `walk` trusts it: in a recall, by the candidate round just before), else from the server.

        The mirror holds every field of a fact, each write of one (renamed endpoints, new sources, updates,
        retrieval counts) stamps it, and deletions reload the group: the answer is the server's.
        """
        if not fact_ids:
            return []
        mirror = await self._mirror(group_id, confirm=False, load=False)
        held = mirror.fact_records(fact_ids) if mirror is not None else None
        if held is not None:
            return self._with_pending(group_id, [fact_from_row({**r, "group_id": group_id}, sn, on) for r, sn, on in held])
        rows = await self._shared_read(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (s:Entity)-[r:FACT {id: $ids[i], group_id: $g}]->(o:Entity) "
            f"RETURN {FACT_RETURN} ORDER BY i", ("r", "sn", "on"),
            ids=list(fact_ids), g=group_id,
        )
        return self._with_pending(group_id, [fact_from_row(x["r"], x["sn"], x["on"]) for x in rows])

    async def get_entities(self, group_id: GroupId, entity_ids: Sequence[str]) -> list[Entity]:
        rows = await self._read_rows(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (n:Entity {id: $ids[i], group_id: $g}) "
            f"RETURN {NODE_ENTITY_MAP} AS n ORDER BY i",
            ids=list(entity_ids), g=group_id,
        )
        return [entity_from_row(r["n"]) for r in rows]

    async def facts_valid_at(self, group_id: GroupId, as_of: datetime, limit: int = 1000) -> list[Fact]:
        rows = await self._read_rows(
            f"MATCH (s:Entity)-[r:FACT {{group_id: $g}}]->(o:Entity) WHERE {VALID_AT} "
            f"RETURN {FACT_RETURN} ORDER BY r.valid_at IS NOT NULL, r.valid_at, r.id LIMIT $k",
            g=group_id, as_of=utc_or_none(as_of), k=int(limit),
        )
        return self._with_pending(group_id, [fact_from_row(x["r"], x["sn"], x["on"]) for x in rows])

    async def edge_history(self, group_id: GroupId, subject_id: str, relation: str | None = None) -> list[Fact]:
        rows = await self._read_rows(
            "MATCH (s:Entity)-[r:FACT {group_id: $g, subject_id: $s}]->(o:Entity) "
            "WHERE $rel IS NULL OR r.relation = $rel "
            f"RETURN {FACT_RETURN} ORDER BY r.valid_at IS NULL, r.valid_at DESC, r.created_at DESC, r.id",
            g=group_id, s=subject_id, rel=relation,
        )
        return self._with_pending(group_id, [fact_from_row(x["r"], x["sn"], x["on"]) for x in rows])

    async def episode_facts(self, group_id: GroupId, episode_ids: Sequence[str]) -> list[Fact]:
        if not episode_ids:
            return []
        rows = await self._read_rows(
            "MATCH (s:Entity)-[r:FACT {group_id: $g}]->(o:Entity) WHERE any(e IN r.episode_ids WHERE e IN $eps) "
            f"RETURN {FACT_RETURN}", g=group_id, eps=list(dict.fromkeys(episode_ids)),
        )
        return self._with_pending(group_id, [fact_from_row(x["r"], x["sn"], x["on"]) for x in rows])

    async def mark_retrieved(self, group_id: GroupId, fact_ids: Sequence[str]) -> None:
        """Counted in memory and written in one statement within RETRIEVAL_FLUSH_S: recall never waits on a write.

        Reads through this store add the counts not yet written (as the embedded store does);
        other processes see them once written. close() writes what is left.
        """
        for fid in fact_ids:
            key = (group_id, fid)
            self._retrievals[key] = self._retrievals.get(key, 0) + 1
        if not self._retrievals or self._driver is None:
            return
        if self._retrieval_task is None or self._retrieval_task.done():
            self._retrieval_task = asyncio.get_running_loop().create_task(self._write_retrievals_later())

    async def reset_retrieval_counts(self, group_id: GroupId) -> None:
        await self.flush_retrievals()
        await self._write(lambda tx: run_rows(tx, RESET_RETRIEVALS, {"g": group_id, "groups": [group_id]}))
        self._mark_written([group_id])

    async def _write_retrievals_later(self) -> None:
        deadline = time.monotonic() + RETRIEVAL_FLUSH_S
        while self._retrievals and self._driver is not None:
            while len(self._retrievals) < RETRIEVAL_BACKLOG and time.monotonic() < deadline:
                await asyncio.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))
            try:
                await self.flush_retrievals()
            except StoreUnavailable:
                pass  # kept (or dropped when the outcome is unknown); tried again after another wait
            deadline = time.monotonic() + RETRIEVAL_FLUSH_S

    async def flush_retrievals(self) -> None:
        """Write the retrieval counts held in memory, in one transaction.

        A failure the server certainly did not commit puts the counts back to be written later;
        a commit whose outcome is unknown drops them (one retrieval lost rather than counted twice).
        """
        pending, self._retrievals = self._retrievals, {}
        if not pending:
            return
        rows = [{"g": g, "id": fid, "n": n} for (g, fid), n in pending.items()]
        groups = sorted({g for g, _ in pending})
        answered = asyncio.Event()
        self._counting.update((g, answered) for g in groups)
        sent = time.monotonic()
        try:
            got = await self._write(unit_of_work(timeout=RETRIEVAL_WRITE_TIMEOUT_S)(
                lambda tx: run_rows(tx, COUNT_RETRIEVALS, {"rows": rows, "groups": groups})))
            self._own_counts_written(got[0]["vers"], got[0]["counts"], sent)
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, nx.IncompleteCommit):
                for key, n in pending.items():
                    self._retrievals[key] = self._retrievals.get(key, 0) + n
            raise
        finally:
            answered.set()
            for g in groups:
                if self._counting.get(g) is answered:
                    del self._counting[g]

    def _own_counts_written(self, vers: list[dict[str, Any]], counts: list[dict[str, Any]], sent: float) -> None:
        """Counts this process just wrote go into its mirrors directly when they were current before the write.

        A mirror at version v-1 of a group this write took to v lacks exactly this write (versions follow
        commit order), so applying the stored counts brings it to v without a catch-up read; and every write
        committed before `sent` is at most v, so a confirmation from then stays true. Any other mirror (behind,
        or another epoch) is marked unconfirmed, as after any write.
        """
        if self._mirrors is None:
            return
        by_group: dict[str, list[tuple[str, int]]] = {}
        for c in counts:
            by_group.setdefault(c["g"], []).append((c["id"], int(c["n"])))
        for x in vers:
            mirror = self._mirrors.peek(x["g"])
            if mirror is not None and mirror.epoch == x["e"] and mirror.version == int(x["v"]) - 1:
                mirror.facts.set_retrievals(by_group.get(x["g"], ()))
                mirror.version = int(x["v"])
            else:
                self._mirrors.stale(x["g"], sent)

    def _with_pending(self, group_id: str, facts: list[Fact]) -> list[Fact]:
        """Retrievals not yet written still count: reads in this process see their own increments."""
        pending = self._retrievals
        if not pending:
            return facts
        return [f if (group_id, f.id) not in pending
                else replace(f, retrieval_count=f.retrieval_count + pending[(group_id, f.id)]) for f in facts]

    async def count_facts(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._read_rows("MATCH ()-[r:FACT]->() RETURN count(r) AS c")
        else:
            rows = await self._read_rows("MATCH ()-[r:FACT {group_id: $g}]->() RETURN count(r) AS c", g=group_id)
        return int(rows[0]["c"])


    async def bulk_load(
        self, entities: Sequence[tuple[Entity, Vector | None]], facts: Sequence[tuple[Fact, Vector | None]],
        batch: int = 2000,
    ) -> None:
        """Load pre-resolved rows in UNWIND batches, bypassing resolution: for benchmarks and imports only.

        Rows become parameters one batch at a time: as Python float lists the embeddings of
        100k facts take over a gigabyte. Batches of a few thousand also leave the vector
        indexes fewer Lucene segments to search than many small commits would.
        """
        for i in range(0, len(entities), batch):
            rows = [{k: v for k, v in entity_params(e, vec).items() if v is not None}
                    for e, vec in entities[i : i + batch]]
            await self._write(lambda tx, rows=rows: run_rows(
                tx,
                BUMP_VERSIONS + "UNWIND $rows AS p CREATE (e:Entity) SET e = p, e.ver = " + VERSION_OF.format("p") + " "
                "WITH e, p UNWIND e.aliases AS key "
                "MERGE (a:Alias {group_id: p.group_id, key: key, type: p.type}) ON CREATE SET a.entity_id = p.id "
                "WITH e, a, p WHERE a.entity_id = p.id MERGE (a)-[:ALIAS_OF]->(e)",
                {"rows": rows, "groups": sorted({r["group_id"] for r in rows})},
            ))
        for i in range(0, len(facts), batch):
            rows = [{k: v for k, v in fact_params(f, vec).items() if v is not None} for f, vec in facts[i : i + batch]]
            await self._write(lambda tx, rows=rows: run_rows(
                tx,
                BUMP_VERSIONS + "UNWIND $rows AS p MATCH (s:Entity {id: p.subject_id}), (o:Entity {id: p.object_id}) "
                "CREATE (s)-[r:FACT]->(o) SET r = p, r.ver = " + VERSION_OF.format("p"),
                {"rows": rows, "groups": sorted({r["group_id"] for r in rows})},
            ))
        self._mark_written({e.group_id for e, _ in entities} | {f.group_id for f, _ in facts})
        await self._open_driver().execute_query("CALL db.awaitIndexes(600)", database_=self.database)

    # -- export (for `mnemobus migrate`) --------------------------------------------------

    async def export_group(self, group_id: GroupId) -> GroupExport:
        """Every row of the group with embeddings and screening flags, for `mnemobus migrate`."""
        await self.flush_retrievals()  # the copy carries every count
        eps = await self._read_rows(
            "MATCH (n:Episode {group_id: $g}) RETURN n {.*} AS n ORDER BY n.reference_time, n.id", g=group_id
        )
        ents = await self._read_rows("MATCH (n:Entity {group_id: $g}) RETURN n {.*} AS n ORDER BY n.id", g=group_id)
        facts = await self._read_rows(
            "MATCH (s:Entity)-[r:FACT {group_id: $g}]->(o:Entity) RETURN r {.*} AS r, s.name AS sn, o.name AS on "
            "ORDER BY r.created_at, r.id",
            g=group_id,
        )
        links = await self._read_rows(
            "MATCH (ep:Episode {group_id: $g})-[:MENTIONS]->(e:Entity {group_id: $g}) RETURN ep.id AS ep, e.id AS e",
            g=group_id,
        )

        def v(x: Any) -> Vector | None:
            return None if x is None else np.asarray(x, dtype=np.float32)

        return GroupExport(
            group_id=group_id,
            episodes=[(episode_from_row(r["n"]), bool(r["n"].get("screened")), v(r["n"].get("embedding"))) for r in eps],
            entities=[(entity_from_row(r["n"]), v(r["n"].get("embedding"))) for r in ents],
            facts=[(fact_from_row(r["r"], r["sn"], r["on"]), v(r["r"].get("embedding"))) for r in facts],
            mentions=[(r["ep"], r["e"]) for r in links],
        )

    async def group_ids(self) -> list[GroupId]:
        """Every group that has an episode, an entity or a promoted memory."""
        rows = await self._read_rows(
            "CALL { MATCH (n:Episode) RETURN DISTINCT n.group_id AS g UNION MATCH (n:Entity) RETURN DISTINCT n.group_id AS g "
            "UNION MATCH (n:Promoted) RETURN DISTINCT n.group_id AS g } "
            "RETURN g ORDER BY g"
        )
        return [GroupId(r["g"]) for r in rows]


