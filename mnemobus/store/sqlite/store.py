"""Embedded default backend: one SQLite file in WAL mode, no server.

Why this shape: SQLite is synchronous, so every call runs in a worker thread
(anyio.to_thread), except a recall's reads of groups already loaded, which
run on the event loop and go to a thread only when one would wait
(`run_reads`, `on_loop.py`). Readers get one connection per thread (WAL lets them run
beside the writer); the single writer connection is used by one transaction
at a time under an async lock. Ingestion's transactions go through
`run_transactions`, which runs a whole batch inside one thread hop (a thread
hop costs far more than the SQL of a typical episode, and an episode makes
dozens of calls), each episode in a savepoint, with one commit per batch. Full-text search is FTS5 with a per-group
token in every row, so a query only walks its own group's postings; vectors
live in the embedding columns and are searched through `VectorCache`.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np

from mnemobus.shared.errors import StoreBusy, StoreCorrupt, StoreIntegrityError, StoreUnavailable
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import (Damage, DeleteCounts, EntityLinks, GraphStore, Hit, Prefetch, Standing, Step,
                                     Vector, WriteTxn, in_turn)
from mnemobus.store.fact_graph import FactGraph
from mnemobus.store.model import EdgeType, Entity, Episode, Fact, GroupExport, Neighbour, Said
from mnemobus.store.sqlite import on_loop
from mnemobus.store.sqlite.communities import SqliteCommunities, add_communities, delete_group_communities
from mnemobus.store.sqlite.fts import TermCounts, fts_search, group_token, terms_match
from mnemobus.store.sqlite.graph import GraphReader, add_versioning
from mnemobus.store.sqlite.integrity import (damage_hint, damaged, file_damage, patient, rebuild_text_indexes,
                                             text_index_damage)
from mnemobus.store.sqlite.group_state import GroupState, read_state
from mnemobus.store.sqlite.lifecycle import SqliteLifecycle, add_lifecycle, delete_lifecycle_rows
from mnemobus.store.sqlite.rows import (EPISODE_COLUMNS, FACT_COLUMNS, FACT_FROM, VALID_AT, episode_of,
                                        fact_of, load_entities, said_of, to_seconds, vector_of)
from mnemobus.store.sqlite.erasures import add_erasure_counts, count_erasures, erasures_of
from mnemobus.store.sqlite.schema import SCHEMA, SCHEMA_VERSION, add_alias_types, add_episode_speaker
from mnemobus.store.sqlite.schema import add_fact_qualifier
from mnemobus.store.sqlite.tx import immediate
from mnemobus.store.sqlite.vectors import UNKNOWN, VectorCache
from mnemobus.store.sqlite.writes import SqliteTxn, delete_episode_rows, drop_facts, insert_entity_row, insert_fact_row

T = TypeVar("T")
P = TypeVar("P")

# the episodes that mention each entity (graph recall): one read for all the seeds, through episode_entities' entity
# index; the group is checked on the episode row (`+`: never the index). Each entity's newest `per_entity` and its
# count are taken in Python (`newest_mentions`): SQLite's two window functions over the same rows cost a third of
# the read (3.5 -> 2.4 ms CPU for 50 entities at 100k turns, docs/performance.md). `episodes_mentioned` named: the
# planner takes the primary key's index, whose every match reads the turn's row besides (3.0-3.3 -> 1.3 ms)
MENTIONS = """
SELECT ee.entity_id, ee.episode_id, ep.reference_time FROM episode_entities ee
JOIN episodes ep INDEXED BY episodes_mentioned ON ep.id = ee.episode_id
WHERE ee.entity_id IN ({marks}) AND +ep.group_id = ? AND ep.reference_time <= ?"""


def newest_mentions(rows: Sequence[tuple[str, str, float]], per_entity: int) -> tuple[list[tuple[str, str]],
                                                                                     dict[str, int]]:
    """Per entity (in id order) its `per_entity` newest episodes (ties by episode id), and how many it has."""
    by_entity: dict[str, list[tuple[float, str]]] = {}
    for entity_id, episode_id, at in rows:
        by_entity.setdefault(entity_id, []).append((-at, episode_id))
    mentions: list[tuple[str, str]] = []
    for entity_id in sorted(by_entity):
        mentions += [(entity_id, ep) for _, ep in sorted(by_entity[entity_id])[:per_entity]]
    return mentions, {e: len(eps) for e, eps in by_entity.items()}

log = logging.getLogger(__name__)

# the turns said just before (-1) and just after (1) an anchor in its channel, nearest first: a range of
# episodes_turns that starts at the anchor ([time, id] compared as one row value), so each side is a seek and
# `span` rows. The earlier form (a time range of episodes_group_time and the tie-break on id in an OR) read every
# turn of the window, of every channel, and sorted the ties on id (docs/performance.md)
TURNS = {
    side: f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE (group_id || '') = ? AND channel_id IS ?"
          f" AND reference_time {edge} ? AND (reference_time, id) {cmp} (?, ?)"
          f" ORDER BY reference_time {order}, id {order} LIMIT ?"
    for side, edge, cmp, order in ((-1, ">=", "<", "DESC"), (1, "<=", ">", "ASC"))
}

# every side of every anchor in one statement: each member is one TURNS seek (a subquery keeps its ORDER BY and
# LIMIT), tagged with its place; 20 statements a group became one (docs/performance.md). Always this many sides
# (ten anchors, the plugin's max_episodes), the unused ones given a side that matches nothing, so the text never
# changes and each connection prepares it once: preparing a 20-member compound took ~0.8 ms, running it ~0.1 ms (load ~20)
TURNS_PER_STATEMENT = 20
_NO_SIDE = (None, None, 0.0, 0.0, "", 0)  # (group_id || '') = NULL is never true: one failed seek


def turns_union(n: int) -> str:
    return " UNION ALL ".join(f"SELECT * FROM (SELECT {i}, {TURNS[1 if i % 2 else -1].removeprefix('SELECT ')})" for i in range(n))


TURNS_UNION = turns_union(TURNS_PER_STATEMENT)


BUSY_TIMEOUT_S = 1.0
READERS = 4  # reader connections per store (see SqliteStore._borrow)
READER_CACHE_KB = 16_384  # reads go through the memory map; the page cache only holds what it does not cover


_BUSY_MARKERS = ("locked", "busy")  # another connection holds the lock for longer than BUSY_TIMEOUT_S
_TRANSIENT_MARKERS = ("disk i/o", "unable to open", "disk is full", "readonly", "no such table")


def _translate(exc: sqlite3.Error) -> Exception:
    text = str(exc).lower()
    if damaged(exc):
        return StoreCorrupt(f"sqlite: {exc}: {damage_hint(exc)}")
    if isinstance(exc, sqlite3.OperationalError) and any(m in text for m in _BUSY_MARKERS):
        return StoreBusy(f"sqlite: {exc}")
    if isinstance(exc, sqlite3.OperationalError) and any(m in text for m in _TRANSIENT_MARKERS):
        return StoreUnavailable(f"sqlite: {exc}")
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreIntegrityError(f"sqlite: {exc}")
    if isinstance(exc, (sqlite3.OperationalError, sqlite3.DatabaseError)):
        return StoreUnavailable(f"sqlite: {exc}")
    return StoreIntegrityError(f"sqlite: {exc}")


class SqliteStore(SqliteLifecycle, SqliteCommunities):
    name = "sqlite"

    def __init__(self, path: Path | str, *, dim: int = 384, vector_cache_mb: int = 512,
                 reads_on_loop: bool = True) -> None:
        self.path = Path(path)
        self.reads_on_loop = reads_on_loop  # see run_reads and on_loop.py
        self._off_loop_observers: list[Callable[[str], None]] = []
        self.dim = dim
        self.vectors = VectorCache(dim, vector_cache_mb * 1024 * 1024)
        # fact graphs: a quarter on top of the vectors. A deletion seen there (by any process) also drops the group's
        # vectors: SQLite may give a new row the rowid of a deleted one, which a top-up by rowid would never read
        self.graphs = GraphReader(vector_cache_mb * 1024 * 1024 // 4, on_deleted=self.vectors.drop_group)
        self.term_counts = TermCounts()
        self._writer: sqlite3.Connection | None = None
        self._write_lock = anyio.Lock()
        self._local = threading.local()  # the connection a run_reads view reads through, per thread
        self._readers: list[sqlite3.Connection] = []  # the pool's reader connections, at most READERS
        self._idle: list[sqlite3.Connection] = []
        self._loop_readers: dict[int, sqlite3.Connection] = {}  # one per event-loop thread (see _loop_reader)
        self._readers_lock = threading.Lock()
        self._reader_slots = threading.BoundedSemaphore(READERS)
        self._pending_retrievals: dict[str, int] = {}
        self._pending_lock = threading.Lock()
        self._count_writer: threading.Thread | None = None
        self._closed = True

    # -- connections -----------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # a short busy wait: a lock held elsewhere surfaces as StoreUnavailable and the worker retries with
        # backoff, rather than one call sitting on the writer for seconds
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA cache_size=-65536")
        conn.execute("PRAGMA mmap_size=268435456")
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA secure_delete=ON")  # a deleted row's bytes are zeroed, not left in a free page
        return conn

    @contextmanager
    def _borrow(self) -> Iterator[sqlite3.Connection]:
        """One of at most READERS reader connections, for as long as the block runs.

        A pool, not one connection per worker thread: each connection keeps its own page cache, and with
        one per thread (anyio runs up to 40) a plugin's RSS grew by a gigabyte over a ten-minute soak. A run on
        the event loop reads through the loop's own connection instead (`_loop_reader`).
        """
        if self._closed:
            raise StoreUnavailable("sqlite store is closed")
        if on_loop.active():
            yield self._loop_reader()
            return
        self._reader_slots.acquire()
        try:
            with self._readers_lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._reader_connection()
                with self._readers_lock:
                    self._readers.append(conn)
            try:
                yield conn
            finally:
                with self._readers_lock:
                    self._idle.append(conn)
        finally:
            self._reader_slots.release()

    def _loop_reader(self) -> sqlite3.Connection:
        """The connection on-loop runs read through, one per event-loop thread: it never waits for a busy file
        (busy_timeout 0), so a busy file sends the run to a worker thread instead of holding up the loop."""
        thread = threading.get_ident()
        conn = self._loop_readers.get(thread)
        if conn is None:
            conn = self._reader_connection()
            conn.execute("PRAGMA busy_timeout=0")
            with self._readers_lock:
                self._loop_readers[thread] = conn
        return conn

    def _reader_connection(self) -> sqlite3.Connection:
        conn = self._connect()
        conn.execute("PRAGMA query_only=1")
        conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KB}")
        return conn

    async def _run(self, fn: Callable[[], T]) -> T:
        def guarded() -> T:
            try:
                return fn()
            except sqlite3.Error as exc:
                raise _translate(exc) from exc

        return await anyio.to_thread.run_sync(guarded)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = getattr(self._local, "conn", None)
        if conn is not None:  # inside run_reads, on its worker thread: the run's snapshot, no hop
            return fn(conn)

        def borrowed() -> T:
            with self._borrow() as conn:
                return fn(conn)

        return await self._run(borrowed)

    async def run_reads(self, work: Callable[[GraphStore, P], Awaitable[T]], prepare: Callable[[], P]) -> T:
        """A recall's reads, and the embedding of its query, on the event loop when its groups are loaded
        (`on_loop.py`), else in one worker-thread hop instead of one hop per read.

        Under load every hop waits for a scheduler slice; a recall makes about
        ten reads per group. Writes and retrieval marks are not allowed inside.
        The work may run twice (dropped on the loop, made again on a thread): it must only read.
        """
        if not self.reads_on_loop or self._closed:
            return await self._run(lambda: self._reads(work, prepare()))
        prepared = prepare()
        try:
            done, outcome = on_loop.attempt(lambda: self._reads(work, prepared))
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise _translate(exc) from exc
            done, outcome = False, "busy"  # the loop's connection waits for no one: a thread's does
        except sqlite3.Error as exc:
            raise _translate(exc) from exc
        if done:
            return outcome  # type: ignore[return-value]
        for observe in self._off_loop_observers:
            observe(str(outcome))
        return await self._run(lambda: self._reads(work, prepared))

    def _reads(self, work: Callable[[GraphStore, P], Awaitable[T]], prepared: P) -> T:
        """`work` to its end on this thread, its reads on one connection and one snapshot."""
        with self._borrow() as conn:  # one connection for the whole run, kept per thread for the view
            # one read transaction: every read of the run sees one snapshot, so each group's version is
            # checked once per run (`_graph`) rather than before each read (four times a group per recall)
            conn.execute("BEGIN")
            self._local.conn, self._local.graphs, self._local.states = conn, {}, {}
            self._local.ranked = {}  # group-free full-text rankings, shared by the run's groups (fts._ranked)
            try:
                return _complete(work(self, prepared))
            finally:
                self._local.conn = self._local.graphs = self._local.states = self._local.ranked = None
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def _graph(self, c: sqlite3.Connection, group_id: str) -> FactGraph:
        """The group's fact graph, current as of this read; inside run_reads checked once per group and run."""
        memo: dict[str, FactGraph] | None = getattr(self._local, "graphs", None)
        if memo is None:
            return self.graphs.current(c, group_id)
        graph = memo.get(group_id)
        if graph is None:
            state = self._state(c, group_id)
            graph = memo[group_id] = self.graphs.current(c, group_id, (state.epoch, state.version) if state else None)
        return graph

    def _state(self, c: sqlite3.Connection, group_id: str) -> GroupState | None:
        """Inside run_reads, the group's version and newest rows, read once per group and run (one snapshot);
        outside it None, and each read asks its own question."""
        memo: dict[str, GroupState] | None = getattr(self._local, "states", None)
        if memo is None:
            return None
        state = memo.get(group_id)
        if state is None:
            state = memo[group_id] = read_state(c, group_id)
        return state

    def _newest(self, c: sqlite3.Connection, table: str, group_id: str) -> Any:
        """What `VectorCache.search_rows` takes as `latest`: known inside run_reads, else UNKNOWN."""
        state = self._state(c, group_id)
        return UNKNOWN if state is None else state.newest[table]

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        def setup() -> sqlite3.Connection:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect()
            conn.executescript(SCHEMA)
            add_alias_types(conn)
            add_versioning(conn)
            add_episode_speaker(conn)
            add_erasure_counts(conn)
            add_lifecycle(conn)
            add_communities(conn)
            add_fact_qualifier(conn)
            conn.execute("DROP INDEX IF EXISTS facts_walk_subject")  # schema 1 walked the graph in SQL
            conn.execute("DROP INDEX IF EXISTS facts_walk_object")
            conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?), ('dim', ?)",
                (str(SCHEMA_VERSION), str(self.dim)),
            )
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
            stored_dim = int(conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()[0])
            if stored_dim != self.dim:
                conn.close()
                raise StoreIntegrityError(
                    f"{self.path} holds {stored_dim}-dimensional embeddings; the configured embedder makes {self.dim}"
                )
            return conn

        try:
            self._writer = await self._run(setup)
        except StoreCorrupt as exc:  # said at start: which file
            raise StoreCorrupt(f"{self.path}: {exc}") from exc
        self._closed = False

    def observe_vector_cache_crowded(self, observer: Callable[[str], None]) -> None:
        """See ReportsCacheCrowding: the vector cache calls `observer(table)` from the searching thread."""
        self.vectors.crowded_observers.append(observer)

    def observe_reads_off_loop(self, observer: Callable[[str], None]) -> None:
        """See ReportsReadsOffLoop: `observer(reason)` once per run of reads that left the loop for a thread."""
        self._off_loop_observers.append(observer)

    async def close(self) -> None:
        if self._closed:
            return
        async with self._write_lock:
            if self._count_writer is not None:
                await anyio.to_thread.run_sync(self._count_writer.join, 5.0)
            await self._run(self._flush_retrievals)
            self._closed = True
            with self._readers_lock:
                readers = self._readers + list(self._loop_readers.values())
                self._readers, self._idle, self._loop_readers = [], [], {}
            for conn in readers:
                conn.close()
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            # a closed store reads nothing, so starts no index build: once those running are done, no thread of
            # the store is left in numpy when its owner exits
            await anyio.to_thread.run_sync(self.vectors.wait_for_indexes)

    async def ping(self) -> None:
        await self._read(lambda c: c.execute("SELECT 1").fetchone())

    # -- episodes ------------------------------------------------------------------

    async def get_episode(self, group_id: GroupId, episode_id: str) -> Episode | None:
        def q(c: sqlite3.Connection) -> Episode | None:
            row = c.execute(
                f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE id = ? AND group_id = ?", (episode_id, group_id)
            ).fetchone()
            return episode_of(row) if row else None

        return await self._read(q)

    async def get_episodes(self, group_id: GroupId, episode_ids: Sequence[str], *,
                           light: bool = False) -> list[Episode | Said]:
        ids = list(dict.fromkeys(episode_ids))
        if not ids:
            return []
        build = said_of if light else episode_of

        def q(c: sqlite3.Connection) -> list[Episode | Said]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(
                f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE +group_id = ? AND id IN ({marks})", (group_id, *ids)
            ).fetchall()
            by_id = {r[0]: build(r) for r in rows}
            return [by_id[i] for i in ids if i in by_id]

        return await self._read(q)

    async def episode_context(self, group_id: GroupId, episode_ids: Sequence[str], *, span: int,
                              within_s: float, light: bool = False) -> list[Neighbour]:
        ids = list(dict.fromkeys(episode_ids))
        if not ids or span <= 0:
            return []
        # the same statement either way (its text is fixed, see TURNS_PER_STATEMENT); only the rows built differ
        build = said_of if light else episode_of

        def q(c: sqlite3.Connection) -> list[Neighbour]:
            marks = ",".join("?" * len(ids))
            anchors = c.execute(f"SELECT id, reference_time, channel_id FROM episodes"
                                f" WHERE +group_id = ? AND id IN ({marks})", (group_id, *ids)).fetchall()
            sides = [(anchor, t, channel, sign) for anchor, t, channel in anchors for sign in (-1, 1)]
            out: list[Neighbour] = []
            for start in range(0, len(sides), TURNS_PER_STATEMENT):
                part = sides[start : start + TURNS_PER_STATEMENT]
                found: list[list[Any]] = [[] for _ in part]
                params = [(group_id, channel, t + sign * within_s, t, anchor, span) for anchor, t, channel, sign in part]
                params += [_NO_SIDE] * (TURNS_PER_STATEMENT - len(part))
                for r in c.execute(TURNS_UNION, [v for side in params for v in side]):
                    found[r[0]].append(r[1:])
                for (anchor, _, _, sign), near in zip(part, found, strict=True):
                    # nearest first: a compound's order is not the subqueries' own, so each side is put in order here
                    near.sort(key=lambda r: (r[5], r[0]), reverse=sign < 0)
                    out.extend(Neighbour(anchor, sign * (i + 1), build(r)) for i, r in enumerate(near))
            return out

        return await self._read(q)

    async def episodes(self, group_id: GroupId, last_n: int = 10) -> list[Episode]:
        def q(c: sqlite3.Connection) -> list[Episode]:
            rows = c.execute(
                f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE group_id = ?"
                " ORDER BY reference_time DESC, rowid DESC LIMIT ?",
                (group_id, max(0, last_n)),
            ).fetchall()
            return [episode_of(r) for r in rows]

        return await self._read(q)

    async def count_episodes(self, group_id: GroupId | None = None) -> int:
        return await self._count("episodes", group_id)

    async def count_facts(self, group_id: GroupId | None = None) -> int:
        return await self._count("facts", group_id)

    async def count_screened(self, group_id: GroupId | None = None) -> int:
        return await self._count("episodes", group_id, "screened = 1")

    async def _count(self, table: str, group_id: GroupId | None, extra: str = "1") -> int:
        def q(c: sqlite3.Connection) -> int:
            if group_id is None:
                return c.execute(f"SELECT count(*) FROM {table} WHERE {extra}").fetchone()[0]
            return c.execute(f"SELECT count(*) FROM {table} WHERE group_id = ? AND {extra}", (group_id,)).fetchone()[0]

        return await self._read(q)

    async def delete_group(self, group_id: GroupId) -> DeleteCounts:
        return await self.delete_groups([group_id])

    async def delete_groups(self, group_ids: Sequence[GroupId]) -> DeleteCounts:
        """Every group in one transaction: a failure (a full disk) part-way leaves all of them as they were."""

        def work() -> DeleteCounts:
            with immediate(self._writer_conn()) as c:
                count_erasures(c, group_ids)  # a write that started before this commit is refused (store/erasures.py)
                return DeleteCounts.total([_delete_group_rows(c, g) for g in group_ids])

        async with self._write_lock:
            counts = await self._run(work)
        for group_id in group_ids:
            self.vectors.drop_group(group_id)
        return counts

    async def erasure_counts(self, group_ids: Sequence[GroupId]) -> dict[GroupId, int]:
        return await self._read(lambda c: erasures_of(c, group_ids))

    async def delete_fact(self, group_id: GroupId, fact_id: str) -> DeleteCounts:
        def work() -> DeleteCounts:
            with immediate(self._writer_conn()) as c:
                return DeleteCounts(facts=drop_facts(c, group_id, [fact_id]))

        async with self._write_lock:
            counts = await self._run(work)
        if counts.facts:
            self.vectors.drop_group(group_id)  # cached matrices would still hold the deleted row
        return counts

    async def erase_residue(self) -> None:
        """Full-text indexes keep a deleted row's words in their segments until merged, and the write-ahead log
        keeps old page images until checkpointed and truncated. The indexes are rebuilt from the rows left, not
        merged with 'optimize': on SQLite 3.40 (Debian 12's, Python's here) each 'optimize' after a write put the
        index a level deeper, and the 1,189th made the table unreadable. A rebuild starts the index afresh;
        it re-reads every row (~0.25 s for 20k messages; docs/performance.md), an erasure's price."""

        def work() -> None:
            c = self._writer_conn()
            with immediate(c):
                rebuild_text_indexes(c)
            busy, _, _ = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise StoreUnavailable("sqlite: a reader held the write-ahead log; erased rows may remain in it")

        async with self._write_lock:
            await self._run(work)

    async def damage(self) -> list[Damage]:
        """The file's pages on a reader (no lock held while it reads them all), then each full-text index on the
        writer, one short write transaction each (`integrity.py`)."""
        def check() -> list[Damage]:
            with patient(self._writer_conn(), BUSY_TIMEOUT_S) as c:
                return text_index_damage(c)

        found = await self._read(file_damage)
        async with self._write_lock:
            return found + await self._run(check)

    async def repair(self, parts: Sequence[str]) -> None:
        def work() -> None:
            with patient(self._writer_conn(), BUSY_TIMEOUT_S) as c, immediate(c):
                rebuild_text_indexes(c, tuple(parts))

        async with self._write_lock:
            await self._run(work)

    async def delete_episode(self, group_id: GroupId, episode_id: str) -> DeleteCounts:
        """Forget one episode: it, its links, and the facts and entities no other episode supports.

        A fact that only this episode observed goes; a fact it merely
        reinforced keeps its other sources. Facts that a deleted fact had
        superseded are valid again (the contradiction came from the deleted
        episode). Entities go once no episode mentions them and no fact
        names them. Renames and aliases the episode added stay.
        """

        def work() -> DeleteCounts:
            with immediate(self._writer_conn()) as c:
                return delete_episode_rows(c, group_id, episode_id)

        async with self._write_lock:
            counts = await self._run(work)
        if counts.episodes:
            self.vectors.drop_group(group_id)  # cached matrices would still hold the deleted rows
        return counts

    async def group_ids(self) -> list[GroupId]:
        """Every group holding an episode, entity or fact (the source side of `mnemobus migrate`)."""
        return await self._read(lambda c: [GroupId(g) for (g,) in c.execute(
            "SELECT group_id FROM episodes UNION SELECT group_id FROM entities UNION SELECT group_id FROM facts"
            " UNION SELECT group_id FROM promoted ORDER BY 1"
        )])

    async def export_group(self, group_id: GroupId) -> GroupExport:
        """Every row of the group as stored, embeddings and screening flags included, read in one snapshot."""
    
        def q(c: sqlite3.Connection) -> GroupExport:
            c.execute("BEGIN")  # one read snapshot: a concurrent ingest cannot split the export
            try:
                episodes = [
                    (episode_of(r), bool(r[13]), vector_of(r[14]))
                    for r in c.execute(
                        f"SELECT {EPISODE_COLUMNS}, screened, embedding FROM episodes WHERE group_id = ?"
                        " ORDER BY reference_time, id", (group_id,)
                    )
                ]
                rows = c.execute(
                    "SELECT id, embedding FROM entities WHERE group_id = ? ORDER BY id", (group_id,)
                ).fetchall()
                loaded = load_entities(c, group_id, [r[0] for r in rows]) if rows else []
                entities = [(e, vector_of(r[1])) for e, r in zip(loaded, rows, strict=True)]
                facts = [
                    (fact_of(r), vector_of(r[-1]))
                    for r in c.execute(
                        f"SELECT {FACT_COLUMNS}, f.embedding FROM {FACT_FROM} WHERE f.group_id = ?"
                        " ORDER BY f.created_at, f.id", (group_id,)
                    )
                ]
                mentions = [
                    (ep, ent) for ep, ent in c.execute(
                        "SELECT ee.episode_id, ee.entity_id FROM episode_entities ee"
                        " JOIN episodes e ON e.id = ee.episode_id WHERE e.group_id = ? ORDER BY 1, 2", (group_id,)
                    )
                ]
            finally:
                c.execute("COMMIT")
            return GroupExport(group_id=group_id, episodes=episodes, entities=entities, facts=facts, mentions=mentions)

        return await self._read(q)

    def _writer_conn(self) -> sqlite3.Connection:
        if self._closed or self._writer is None:
            raise StoreUnavailable("sqlite store is closed")
        return self._writer

    # -- the write transaction ----------------------------------------------------------

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteTxn]:
        async with self._write_lock:
            conn = self._writer_conn()
            await self._run(lambda: (conn.execute("BEGIN IMMEDIATE"), self._flush_retrievals_in(conn)))
            txn = SqliteTxn(self._run, self.vectors, conn)
            try:
                yield txn
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self._run(lambda: conn.in_transaction and conn.execute("ROLLBACK"))
                for group_id in txn.groups:  # the cache may hold rows that were rolled back
                    self.vectors.drop_group(group_id)
                raise
            else:
                with anyio.CancelScope(shield=True):
                    await self._run(lambda: conn.execute("COMMIT"))

    async def run_transactions(
        self, works: Sequence[Callable[[WriteTxn], Awaitable[T]]], prefetch: Prefetch | None = None
    ) -> list[T | Exception]:
        """Each work atomic on its own, the batch committed at once, all inside one thread hop.

        Each work runs in a savepoint: one that raises is rolled back alone and
        its exception lands in its slot, the others are unaffected. The batch
        then shares one COMMIT, because a commit (FTS5 segment writes, WAL
        checkpoints) cost more than everything else an episode does: measured
        at 2.5 ms of ~4 ms per episode. Results are returned only after that
        commit; if the commit itself fails, or the store turns out to be
        unavailable midway (disk error), every work gets the error and nothing
        of the batch is kept. A work must only await the WriteTxn it is given:
        its calls run synchronously on the writer connection, so the coroutine
        finishes without ever suspending. `prefetch` is ignored: reads cost no round trip here, and
        BEGIN IMMEDIATE already keeps every other writer out until the commit.
        """
        if not works:
            return []

        def run_all() -> list[T | Exception]:
            try:
                c = self._writer_conn()
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                return [_translate(exc) for _ in works]
            except StoreUnavailable as exc:
                return [StoreUnavailable(str(exc)) for _ in works]
            touched: set[str] = set()
            flushed: dict[str, int] = {}
            try:
                flushed = self._flush_retrievals_in(c)
                out = [self._one_savepoint(c, work, touched) for work in works]
                c.execute("COMMIT")
                return out
            except BaseException as exc:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                self._restore_retrievals(flushed)
                for group_id in touched:  # the cache may hold rows that were rolled back
                    self.vectors.drop_group(group_id)
                if isinstance(exc, sqlite3.Error):
                    exc = _translate(exc)
                if isinstance(exc, Exception):
                    return [exc for _ in works]
                raise

        async with self._write_lock:
            return await anyio.to_thread.run_sync(run_all)

    def _one_savepoint(self, c: sqlite3.Connection, work: Callable[[WriteTxn], Awaitable[T]],
                       touched: set[str]) -> T | Exception:
        """One work inside the batch's transaction; StoreUnavailable propagates and fails the whole batch."""
        c.execute("SAVEPOINT work")
        txn = SqliteTxn(self._run, self.vectors, c, inline=True)
        try:
            result: T | Exception = _complete(work(txn))
        except (StoreUnavailable, sqlite3.OperationalError):
            touched |= txn.groups
            raise  # locked, disk error: the whole batch rolls back and is retried
        except Exception as exc:  # noqa: BLE001 - returned in the work's slot, never affects the others
            c.execute("ROLLBACK TO work")
            for group_id in txn.groups:  # the cache may hold rows that were rolled back
                self.vectors.drop_group(group_id)
            result = _translate(exc) if isinstance(exc, sqlite3.Error) else exc
        touched |= txn.groups
        c.execute("RELEASE work")
        return result

    def _flush_retrievals_in(self, conn: sqlite3.Connection) -> dict[str, int]:
        with self._pending_lock:
            pending, self._pending_retrievals = self._pending_retrievals, {}
        if pending:
            conn.executemany(
                "UPDATE facts SET retrieval_count = retrieval_count + ? WHERE id = ?",
                [(n, fid) for fid, n in pending.items()],
            )
        return pending

    def _restore_retrievals(self, flushed: dict[str, int]) -> None:
        """Counts taken by a transaction that rolled back are owed again."""
        if not flushed:
            return
        with self._pending_lock:
            for fid, n in flushed.items():
                self._pending_retrievals[fid] = self._pending_retrievals.get(fid, 0) + n

    def _flush_retrievals(self) -> None:
        if self._writer is None or not self._pending_retrievals:
            return
        with immediate(self._writer) as c:
            self._flush_retrievals_in(c)

    async def mark_retrieved(self, group_id: GroupId, fact_ids: Sequence[str]) -> None:
        """Counted in memory, written with the next write transaction or, past 1,000 pending (a process that
        only reads), by a background thread on a connection of its own: recall never waits on a write, nor
        fails with one (docs/performance.md)."""
        if getattr(self._local, "conn", None) is not None:
            raise RuntimeError("mark_retrieved may write: call it outside run_reads")
        with self._pending_lock:
            for fid in fact_ids:
                self._pending_retrievals[fid] = self._pending_retrievals.get(fid, 0) + 1
            backlog = len(self._pending_retrievals)
            start = backlog >= 1000 and not self._closed and (
                self._count_writer is None or not self._count_writer.is_alive())
            if start:
                self._count_writer = threading.Thread(target=self._write_counts, name="retrieval-counts", daemon=True)
                self._count_writer.start()

    async def reset_retrieval_counts(self, group_id: GroupId) -> None:
        def reset() -> None:
            with immediate(self._writer_conn()) as c:
                self._flush_retrievals_in(c)
                c.execute("UPDATE facts SET retrieval_count = 0 WHERE group_id = ? AND retrieval_count != 0",
                          (group_id,))

        await self._run(reset)

    def _write_counts(self) -> None:
        flushed: dict[str, int] = {}
        try:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                before = self.graphs.held_versions(conn)  # the held graphs told the counts, not read back
                flushed = self._flush_retrievals_in(conn)
                with self.graphs.counting(before, self.graphs.held_versions(conn), flushed):
                    conn.execute("COMMIT")
            finally:
                conn.close()  # rolls back whatever did not commit
        except sqlite3.Error as exc:
            self._restore_retrievals(flushed)  # owed again: the next transaction or thread writes them
            log.warning("writing %d retrieval counts failed, kept for later: %s", len(flushed), exc)

    # -- candidate queries ------------------------------------------------------------

    async def _fts(self, table: str, group_id: GroupId, terms: Sequence[str], limit: int, where: str = "",
                   params: dict[str, Any] | None = None) -> list[Hit]:
        if terms_match(terms) is None or limit <= 0:
            return []

        def q(c: sqlite3.Connection) -> list[Hit]:
            state = self._state(c, group_id)
            return fts_search(c, table, group_id, terms, limit, where, params, counts=self.term_counts,
                              has_rows=None if state is None else state.has_rows(table.removesuffix("_fts")),
                              shared=getattr(self._local, "ranked", None))

        return await self._read(q)

    async def search_facts_text(self, group_id: GroupId, terms: Sequence[str], as_of: datetime, limit: int) -> list[Hit]:
        where = "AND (x.valid_at IS NULL OR x.valid_at <= :t) AND (x.invalid_at IS NULL OR x.invalid_at > :t)"
        return await self._fts("facts_fts", group_id, terms, limit, where=where, params={"t": to_seconds(as_of)})

    async def search_entities_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._fts("entities_fts", group_id, terms, limit)

    async def search_episodes_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._fts("episodes_fts", group_id, terms, limit)

    async def _vector(self, table: str, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        if limit <= 0:
            return []
        return await self._read(lambda c: [Hit(i, s) for i, s, _ in self.vectors.search_rows(
            c, table, group_id, np.asarray(vector), limit, self._newest(c, table, group_id))])

    async def search_facts_vector(self, group_id: GroupId, vector: Vector, as_of: datetime, limit: int) -> list[Hit]:
        if limit <= 0:
            return []
        t = to_seconds(as_of)

        def q(c: sqlite3.Connection) -> list[Hit]:
            # most stored facts are still valid: ask for twice the limit, and widen only when too few were
            wanted = limit * 2
            self._graph(c, group_id)  # before the vectors too: a deletion elsewhere drops them (see __init__)
            while True:
                hits = self.vectors.search_rows(c, "facts", group_id, np.asarray(vector), wanted,
                                                self._newest(c, "facts", group_id))
                if not hits:
                    return []
                # after the vectors: it holds every row they returned (in run_reads one snapshot serves both reads)
                graph = self._graph(c, group_id)
                with on_loop.held(graph.lock):
                    valid = graph.valid([h[0] for h in hits], t)
                found = [Hit(i, score) for i, score, _ in hits if i in valid]
                if len(found) >= limit or len(hits) < wanted or wanted >= limit * 32:
                    return found[:limit]
                wanted *= 4

        return await self._read(q)

    async def search_entities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        return await self._vector("entities", group_id, vector, limit)

    async def search_episodes_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        return await self._vector("episodes", group_id, vector, limit)

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
        t = to_seconds(as_of)

        def q(c: sqlite3.Connection) -> list[Step]:
            graph = self._graph(c, group_id)
            with on_loop.held(graph.lock):
                return [Step(*step) for step in graph.walk(entity_ids, t, max_hops, relations, edge_types, limit)]

        return await self._read(q)

    async def entity_links(self, group_id: GroupId, entity_ids: Sequence[str], *, as_of: datetime,
                           per_entity: int) -> EntityLinks:
        ids = list(dict.fromkeys(entity_ids))
        if not ids or per_entity <= 0:
            return EntityLinks()
        t = to_seconds(as_of)

        def q(c: sqlite3.Connection) -> EntityLinks:
            rows = c.execute(MENTIONS.format(marks=",".join("?" * len(ids))), (*ids, group_id, t)).fetchall()
            mentions, mention_degree = newest_mentions(rows, per_entity)
            graph = self._graph(c, group_id)
            with on_loop.held(graph.lock):
                facts, fact_degree = graph.around(ids, t, per_entity)
            return EntityLinks(mentions=tuple(mentions), facts=tuple(facts), mention_degree=mention_degree,
                               fact_degree=fact_degree)

        return await self._read(q)

    async def warm(self, max_groups: int, groups_prefix: str = "") -> list[GroupId]:
        """Most recently written groups first (the newest episode rowid of each), each loaded whole (its graph and
        its three vector matrices), until `max_groups` or until the vectors fill nine tenths of their budget."""

        def q(c: sqlite3.Connection) -> list[GroupId]:
            recent = [GroupId(g) for (g,) in c.execute(
                "SELECT group_id FROM episodes WHERE substr(group_id, 1, ?) = ? GROUP BY group_id "
                "ORDER BY max(rowid) DESC LIMIT ?", (len(groups_prefix), groups_prefix, max_groups))]
            warmed: list[GroupId] = []
            for group_id in recent:
                if self.vectors.held_bytes() >= 0.9 * self.vectors.budget:
                    break
                self._graph(c, group_id)
                for table in ("facts", "entities", "episodes"):
                    self.vectors.load(c, table, group_id)
                warmed.append(group_id)
            return warmed

        return await self._read(q) if max_groups > 0 else []

    # -- fetches ------------------------------------------------------------------------------

    async def get_facts(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Fact]:
        ids = list(dict.fromkeys(fact_ids))
        if not ids:
            return []

        def q(c: sqlite3.Connection) -> list[Fact]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(
                f"SELECT {FACT_COLUMNS} FROM {FACT_FROM} WHERE +f.group_id = ? AND f.id IN ({marks})", (group_id, *ids)
            ).fetchall()
            # retrievals not yet flushed still count: reads in this process see their own increments
            by_id = {r[0]: fact_of(r, self._pending_retrievals) for r in rows}
            return [by_id[i] for i in ids if i in by_id]

        return await self._read(q)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """In turn: the reads share one thread and one connection, so nothing would overlap."""
        return await in_turn(calls)

    async def fact_standings(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Standing | Fact]:
        """From the group's in-memory graph: what recall weighs ~20 candidates a group by (a whole fact joins
        two entities and gathers its provenance)."""
        ids = list(dict.fromkeys(fact_ids))
        if not ids:
            return []

        def q(c: sqlite3.Connection) -> list[Standing]:
            graph = self._graph(c, group_id)
            with on_loop.held(graph.lock):
                return graph.standings(ids, self._pending_retrievals)

        return await self._read(q)

    async def get_entities(self, group_id: GroupId, entity_ids: Sequence[str]) -> list[Entity]:
        ids = list(dict.fromkeys(entity_ids))
        if not ids:
            return []
        return await self._read(lambda c: load_entities(c, group_id, ids))

    async def facts_valid_at(self, group_id: GroupId, as_of: datetime, limit: int = 1000) -> list[Fact]:
        def q(c: sqlite3.Connection) -> list[Fact]:
            rows = c.execute(
                f"SELECT {FACT_COLUMNS} FROM {FACT_FROM} WHERE f.group_id = :g AND {VALID_AT}"
                " ORDER BY coalesce(f.valid_at, -1e18), f.id LIMIT :k",
                {"g": group_id, "t": to_seconds(as_of), "k": limit},
            ).fetchall()
            return [fact_of(r) for r in rows]

        return await self._read(q)

    async def edge_history(self, group_id: GroupId, subject_id: str, relation: str | None = None) -> list[Fact]:
        def q(c: sqlite3.Connection) -> list[Fact]:
            # +group_id: filtered by value, so the planner takes the subject index (a group index reads the group)
            sql = f"SELECT {FACT_COLUMNS} FROM {FACT_FROM} WHERE +f.group_id = ? AND f.subject_id = ?"
            params: list[Any] = [group_id, subject_id]
            if relation is not None:
                sql += " AND f.relation = ?"
                params.append(relation)
            sql += " ORDER BY coalesce(f.valid_at, -1e18) DESC, f.created_at DESC"
            return [fact_of(r) for r in c.execute(sql, params).fetchall()]

        return await self._read(q)

    async def episode_facts(self, group_id: GroupId, episode_ids: Sequence[str]) -> list[Fact]:
        ids = list(dict.fromkeys(episode_ids))
        if not ids:
            return []

        def q(c: sqlite3.Connection) -> list[Fact]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(f"SELECT {FACT_COLUMNS} FROM {FACT_FROM} WHERE +f.group_id = ? AND f.id IN "
                             f"(SELECT fact_id FROM fact_sources WHERE episode_id IN ({marks}))", (group_id, *ids))
            return [fact_of(r) for r in rows.fetchall()]

        return await self._read(q)

    # -- bulk loading (benchmarks, imports) -------------------------------------------------

    def bulk_load_sync(self, entities: Sequence[tuple[Entity, Vector | None]],
                       facts: Sequence[tuple[Fact, Vector | None]]) -> None:
        """Load pre-resolved rows in one transaction, bypassing resolution: for benchmarks and imports only."""
        with immediate(self._writer_conn()) as c:
            for entity, vec in entities:
                insert_entity_row(c, entity, vec)
            for fact, vec in facts:
                insert_fact_row(c, fact, vec)


def _complete(coro: Awaitable[T]) -> T:
    """Run a coroutine that never suspends to its end, on the calling worker thread.

    The store's contract is async, but a whole recall (`run_reads`) or a batch
    of ingests (`run_transactions`) costs one thread hop, not one per query:
    inside them every read and write returns without suspending, so one `send`
    finishes the work. A work that awaits anything else is refused, not hung.
    """
    if not isinstance(coro, Coroutine):
        raise TypeError(f"a transaction work must be a coroutine, got {type(coro).__name__}")
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a one-hop work (run_reads or run_transactions) awaited something that suspends")


def _delete_group_rows(c: sqlite3.Connection, group_id: GroupId) -> DeleteCounts:
    """One group's rows, inside the caller's transaction."""
    c.execute("DELETE FROM fact_sources WHERE fact_id IN (SELECT id FROM facts WHERE group_id = ?)", (group_id,))
    c.execute("DELETE FROM episode_entities WHERE episode_id IN (SELECT id FROM episodes WHERE group_id = ?)",
              (group_id,))
    c.execute("DELETE FROM aliases WHERE group_id = ?", (group_id,))
    delete_group_communities(c, group_id)
    tok = group_token(group_id)
    for fts in ("facts_fts", "entities_fts", "episodes_fts"):
        c.execute(f"DELETE FROM {fts} WHERE gtok MATCH ?", (tok,))
    facts = c.execute("DELETE FROM facts WHERE group_id = ?", (group_id,)).rowcount
    entities = c.execute("DELETE FROM entities WHERE group_id = ?", (group_id,)).rowcount
    episodes = c.execute("DELETE FROM episodes WHERE group_id = ?", (group_id,)).rowcount
    delete_lifecycle_rows(c, group_id)
    return DeleteCounts(episodes=episodes, entities=entities, facts=facts)
