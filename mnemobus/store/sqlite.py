"""Embedded default backend: one SQLite file in WAL mode, no server.

Why this shape: SQLite is synchronous, so every call runs in a worker thread
(anyio.to_thread). Readers get one connection per thread (WAL lets them run
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import numpy as np

from mnemobus.errors import StoreIntegrityError, StoreUnavailable, episode_id_taken
from mnemobus.store.sqlite_tx import immediate
from mnemobus.groups import GroupId
from mnemobus.store.contract import DeleteCounts, GraphStore, Hit, Prefetch, Standing, Step, Vector, WriteTxn, pick_by_type
from mnemobus.store.fact_graph import EPOCH as _EPOCH
from mnemobus.store.fact_graph import FactGraph
from mnemobus.store.fact_graph import utc_from_seconds as _dt
from mnemobus.store.model import EdgeType, Entity, Episode, Fact, GroupExport
from mnemobus.store.sqlite_graph import GraphReader, add_versioning
from mnemobus.store.sqlite_fts import TermCounts, fts_search, group_token, terms_match
from mnemobus.store.sqlite_vectors import VectorCache

T = TypeVar("T")
log = logging.getLogger(__name__)

SCHEMA_VERSION = 4  # 2: fact rows stamped with their group's version (sqlite_graph); 3: aliases keyed by type;
# 4: an episode keeps its speaker and name
BUSY_TIMEOUT_S = 1.0
READERS = 4  # reader connections per store (see SqliteStore._borrow)
READER_CACHE_KB = 16_384  # reads go through the memory map; the page cache only holds what it does not cover
_SEP = "\x1f"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, content TEXT NOT NULL, role TEXT NOT NULL,
  source_message_id TEXT NOT NULL, reference_time REAL NOT NULL, response TEXT, agent_id TEXT,
  platform TEXT, channel_id TEXT, created_at REAL NOT NULL, screened INTEGER NOT NULL DEFAULT 0,
  embedding BLOB, speaker TEXT, name TEXT);
CREATE INDEX IF NOT EXISTS episodes_group_time ON episodes(group_id, reference_time);
-- rowid order within a group: the vector cache asks for a group's newest row on every search (O(log n) here,
-- a scan of the whole group through episodes_group_time: 84 µs at 1k episodes, growing linearly)
CREATE INDEX IF NOT EXISTS episodes_group ON episodes(group_id);
CREATE TABLE IF NOT EXISTS entities(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, name TEXT NOT NULL, canonical_name TEXT NOT NULL,
  type TEXT NOT NULL, summary TEXT NOT NULL DEFAULT '', confidence REAL NOT NULL,
  first_seen REAL, last_seen REAL, embedding BLOB);
CREATE INDEX IF NOT EXISTS entities_group ON entities(group_id);
CREATE TABLE IF NOT EXISTS aliases(
  group_id TEXT NOT NULL, alias TEXT NOT NULL, type TEXT NOT NULL, entity_id TEXT NOT NULL,
  PRIMARY KEY(group_id, alias, type)) WITHOUT ROWID;  -- one entity per alias and type (see add_alias_types)
CREATE INDEX IF NOT EXISTS aliases_entity ON aliases(entity_id);
CREATE TABLE IF NOT EXISTS facts(
  id TEXT PRIMARY KEY, group_id TEXT NOT NULL, subject_id TEXT NOT NULL, object_id TEXT NOT NULL,
  relation TEXT NOT NULL, edge_type TEXT NOT NULL, fact TEXT NOT NULL, confidence REAL NOT NULL,
  valid_at REAL, invalid_at REAL, created_at REAL NOT NULL, expired_at REAL, superseded_by TEXT,
  last_seen REAL, retrieval_count INTEGER NOT NULL DEFAULT 0, embedding BLOB,
  ver INTEGER NOT NULL DEFAULT 0);  -- see sqlite_graph
CREATE INDEX IF NOT EXISTS facts_group ON facts(group_id);
CREATE INDEX IF NOT EXISTS facts_subject ON facts(subject_id, relation);
CREATE INDEX IF NOT EXISTS facts_object ON facts(object_id);
CREATE TABLE IF NOT EXISTS fact_sources(
  fact_id TEXT NOT NULL, episode_id TEXT NOT NULL, source_message_id TEXT NOT NULL,
  PRIMARY KEY(fact_id, episode_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS episode_entities(
  episode_id TEXT NOT NULL, entity_id TEXT NOT NULL, PRIMARY KEY(episode_id, entity_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS episode_entities_entity ON episode_entities(entity_id);
CREATE VIRTUAL TABLE IF NOT EXISTS episodes_fts USING fts5(gtok, body, tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS entities_fts USING fts5(gtok, body, tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS facts_fts USING fts5(gtok, body, tokenize='porter unicode61 remove_diacritics 2');
"""

_VALID_AT = "(f.valid_at IS NULL OR f.valid_at <= :t) AND (f.invalid_at IS NULL OR f.invalid_at > :t)"

_FACT_COLUMNS = """
f.id, f.group_id, f.subject_id, f.object_id, s.name, o.name, f.relation, f.edge_type, f.fact,
f.confidence, f.valid_at, f.invalid_at, f.created_at, f.expired_at, f.superseded_by, f.last_seen,
f.retrieval_count,
(SELECT group_concat(episode_id, char(31)) FROM fact_sources fs WHERE fs.fact_id = f.id),
(SELECT group_concat(source_message_id, char(31)) FROM fact_sources fs WHERE fs.fact_id = f.id)
"""
_FACT_FROM = "facts f JOIN entities s ON s.id = f.subject_id JOIN entities o ON o.id = f.object_id"

_EPISODE_COLUMNS = (
    "id, group_id, content, role, source_message_id, reference_time, response, agent_id, platform,"
    " channel_id, created_at, speaker, name"
)


def add_episode_speaker(conn: sqlite3.Connection) -> None:
    """Schema 4: an episode keeps who said it and the name it was given, so it can be shown as it was sent."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(episodes)")}
    with conn:
        for column in ("speaker", "name"):
            if column not in have:
                conn.execute(f"ALTER TABLE episodes ADD COLUMN {column} TEXT")


def add_alias_types(conn: sqlite3.Connection) -> None:
    """Schema 3: an alias is unique per type, not per group (Jordan the place and Jordan the person). A file from
    before gets the column, each alias the type of its entity."""
    if "type" in {row[1] for row in conn.execute("PRAGMA table_info(aliases)")}:
        return
    with conn:
        conn.executescript("""
            CREATE TABLE aliases_typed(
              group_id TEXT NOT NULL, alias TEXT NOT NULL, type TEXT NOT NULL, entity_id TEXT NOT NULL,
              PRIMARY KEY(group_id, alias, type)) WITHOUT ROWID;
            INSERT INTO aliases_typed SELECT a.group_id, a.alias, coalesce(e.type, 'thing'), a.entity_id
              FROM aliases a LEFT JOIN entities e ON e.id = a.entity_id;
            DROP TABLE aliases;
            ALTER TABLE aliases_typed RENAME TO aliases;
            CREATE INDEX IF NOT EXISTS aliases_entity ON aliases(entity_id);
        """)


def _ts(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _blob(vector: Vector | None) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(value.split(_SEP)) if value else ()


def _fact(row: Sequence[Any], pending: dict[str, int] | None = None) -> Fact:
    return Fact(
        id=row[0],
        group_id=GroupId(row[1]),
        subject_id=row[2],
        object_id=row[3],
        subject_name=row[4],
        object_name=row[5],
        relation=row[6],
        edge_type=row[7],
        fact=row[8],
        confidence=row[9],
        valid_at=_dt(row[10]),
        invalid_at=_dt(row[11]),
        created_at=_dt(row[12]) or _EPOCH,
        expired_at=_dt(row[13]),
        superseded_by=row[14],
        last_seen=_dt(row[15]),
        retrieval_count=row[16] + (pending.get(row[0], 0) if pending else 0),
        episode_ids=_split(row[17]),
        source_message_ids=_split(row[18]),
    )


def _episode(row: Sequence[Any]) -> Episode:
    return Episode(
        id=row[0],
        group_id=GroupId(row[1]),
        content=row[2],
        role=row[3],
        source_message_id=row[4],
        reference_time=_dt(row[5]),  # type: ignore[arg-type]
        response=row[6],
        agent_id=row[7],
        platform=row[8],
        channel_id=row[9],
        created_at=_dt(row[10]),
        speaker=row[11],
        name=row[12],
    )


def _entity(row: Sequence[Any], aliases: tuple[str, ...]) -> Entity:
    return Entity(
        id=row[0],
        group_id=GroupId(row[1]),
        name=row[2],
        canonical_name=row[3],
        type=row[4],
        aliases=aliases,
        summary=row[5],
        confidence=row[6],
        first_seen=_dt(row[7]),
        last_seen=_dt(row[8]),
    )


_TRANSIENT_MARKERS = ("locked", "busy", "disk i/o", "unable to open", "disk is full", "readonly", "no such table")


def _translate(exc: sqlite3.Error) -> Exception:
    text = str(exc).lower()
    if isinstance(exc, sqlite3.OperationalError) and any(m in text for m in _TRANSIENT_MARKERS):
        return StoreUnavailable(f"sqlite: {exc}")
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreIntegrityError(f"sqlite: {exc}")
    if isinstance(exc, (sqlite3.OperationalError, sqlite3.DatabaseError)):
        return StoreUnavailable(f"sqlite: {exc}")
    return StoreIntegrityError(f"sqlite: {exc}")


class SqliteStore:
    name = "sqlite"

    def __init__(self, path: Path | str, *, dim: int = 384, vector_cache_mb: int = 512) -> None:
        self.path = Path(path)
        self.dim = dim
        self.vectors = VectorCache(dim, vector_cache_mb * 1024 * 1024)
        # fact graphs: a quarter on top of the vectors. A deletion seen there (by any process) also drops the group's
        # vectors: SQLite may give a new row the rowid of a deleted one, which a top-up by rowid would never read
        self.graphs = GraphReader(vector_cache_mb * 1024 * 1024 // 4, on_deleted=self.vectors.drop_group)
        self.term_counts = TermCounts()
        self._writer: sqlite3.Connection | None = None
        self._write_lock = anyio.Lock()
        self._local = threading.local()  # the connection a run_reads view reads through, per thread
        self._readers: list[sqlite3.Connection] = []  # every reader connection opened, for close()
        self._idle: list[sqlite3.Connection] = []
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
        one per thread (anyio runs up to 40) a plugin's RSS grew by a gigabyte over a ten-minute soak.
        """
        if self._closed:
            raise StoreUnavailable("sqlite store is closed")
        self._reader_slots.acquire()
        try:
            with self._readers_lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = self._connect()
                conn.execute("PRAGMA query_only=1")
                conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KB}")
                with self._readers_lock:
                    self._readers.append(conn)
            try:
                yield conn
            finally:
                with self._readers_lock:
                    self._idle.append(conn)
        finally:
            self._reader_slots.release()

    async def _run(self, fn: Callable[[], T]) -> T:
        def guarded() -> T:
            try:
                return fn()
            except sqlite3.Error as exc:
                raise _translate(exc) from exc

        return await anyio.to_thread.run_sync(guarded)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def borrowed() -> T:
            with self._borrow() as conn:
                return fn(conn)

        return await self._run(borrowed)

    async def run_reads(self, work: Callable[[GraphStore], Awaitable[T]]) -> T:
        """Run a sequence of reads (one group's recall) in one worker-thread hop instead of one hop per read.

        Under load every hop waits for a scheduler slice; a recall makes about
        ten reads per group. Writes and retrieval marks are not allowed inside.
        """
        def inline() -> T:
            with self._borrow() as conn:  # one connection for the whole run, kept per thread for the view
                # one read transaction: every read of the run sees one snapshot, so each group's version is
                # checked once per run (`_graph`) rather than before each read (four times a group per recall)
                conn.execute("BEGIN")
                self._local.conn, self._local.graphs = conn, {}
                try:
                    return _complete(work(_InlineReads(self)))
                finally:
                    self._local.conn = self._local.graphs = None
                    if conn.in_transaction:
                        conn.execute("COMMIT")

        return await self._run(inline)

    def _graph(self, c: sqlite3.Connection, group_id: str) -> FactGraph:
        """The group's fact graph, current as of this read; inside run_reads checked once per group and run."""
        memo: dict[str, FactGraph] | None = getattr(self._local, "graphs", None)
        if memo is None:
            return self.graphs.current(c, group_id)
        graph = memo.get(group_id)
        if graph is None:
            graph = memo[group_id] = self.graphs.current(c, group_id)
        return graph

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        def setup() -> sqlite3.Connection:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._connect()
            conn.executescript(_SCHEMA)
            add_alias_types(conn)
            add_versioning(conn)
            add_episode_speaker(conn)
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

        self._writer = await self._run(setup)
        self._closed = False

    async def close(self) -> None:
        if self._closed:
            return
        async with self._write_lock:
            if self._count_writer is not None:
                await anyio.to_thread.run_sync(self._count_writer.join, 5.0)
            await self._run(self._flush_retrievals)
            self._closed = True
            with self._readers_lock:
                readers, self._readers, self._idle = self._readers, [], []
            for conn in readers:
                conn.close()
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    async def ping(self) -> None:
        await self._read(lambda c: c.execute("SELECT 1").fetchone())

    # -- episodes ------------------------------------------------------------------

    async def get_episode(self, group_id: GroupId, episode_id: str) -> Episode | None:
        def q(c: sqlite3.Connection) -> Episode | None:
            row = c.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE id = ? AND group_id = ?", (episode_id, group_id)
            ).fetchone()
            return _episode(row) if row else None

        return await self._read(q)

    async def get_episodes(self, group_id: GroupId, episode_ids: Sequence[str]) -> list[Episode]:
        ids = list(dict.fromkeys(episode_ids))
        if not ids:
            return []

        def q(c: sqlite3.Connection) -> list[Episode]:
            marks = ",".join("?" * len(ids))
            rows = c.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE +group_id = ? AND id IN ({marks})", (group_id, *ids)
            ).fetchall()
            by_id = {r[0]: _episode(r) for r in rows}
            return [by_id[i] for i in ids if i in by_id]

        return await self._read(q)

    async def episodes(self, group_id: GroupId, last_n: int = 10) -> list[Episode]:
        def q(c: sqlite3.Connection) -> list[Episode]:
            rows = c.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE group_id = ?"
                " ORDER BY reference_time DESC, rowid DESC LIMIT ?",
                (group_id, max(0, last_n)),
            ).fetchall()
            return [_episode(r) for r in rows]

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
        tok = group_token(group_id)

        def work() -> DeleteCounts:
            with immediate(self._writer_conn()) as c:
                c.execute(
                    "DELETE FROM fact_sources WHERE fact_id IN (SELECT id FROM facts WHERE group_id = ?)", (group_id,)
                )
                c.execute(
                    "DELETE FROM episode_entities WHERE episode_id IN (SELECT id FROM episodes WHERE group_id = ?)",
                    (group_id,),
                )
                c.execute("DELETE FROM aliases WHERE group_id = ?", (group_id,))
                for fts in ("facts_fts", "entities_fts", "episodes_fts"):
                    c.execute(f"DELETE FROM {fts} WHERE gtok MATCH ?", (tok,))
                facts = c.execute("DELETE FROM facts WHERE group_id = ?", (group_id,)).rowcount
                entities = c.execute("DELETE FROM entities WHERE group_id = ?", (group_id,)).rowcount
                episodes = c.execute("DELETE FROM episodes WHERE group_id = ?", (group_id,)).rowcount
            return DeleteCounts(episodes=episodes, entities=entities, facts=facts)

        async with self._write_lock:
            counts = await self._run(work)
        self.vectors.drop_group(group_id)
        return counts

    async def delete_fact(self, group_id: GroupId, fact_id: str) -> DeleteCounts:
        def work() -> DeleteCounts:
            with immediate(self._writer_conn()) as c:
                return DeleteCounts(facts=_drop_facts(c, group_id, [fact_id]))

        async with self._write_lock:
            counts = await self._run(work)
        if counts.facts:
            self.vectors.drop_group(group_id)  # cached matrices would still hold the deleted row
        return counts

    async def erase_residue(self) -> None:
        """Full-text indexes keep a deleted row's words in their segments until merged ('optimize' merges them
        all), and the write-ahead log keeps old page images until checkpointed and truncated."""

        def work() -> None:
            c = self._writer_conn()
            with immediate(c):
                for fts in ("facts_fts", "entities_fts", "episodes_fts"):
                    c.execute(f"INSERT INTO {fts}({fts}) VALUES('optimize')")
            busy, _, _ = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise StoreUnavailable("sqlite: a reader held the write-ahead log; erased rows may remain in it")

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
                return _delete_episode(c, group_id, episode_id)

        async with self._write_lock:
            counts = await self._run(work)
        if counts.episodes:
            self.vectors.drop_group(group_id)  # cached matrices would still hold the deleted rows
        return counts

    async def group_ids(self) -> list[GroupId]:
        """Every group holding an episode, entity or fact (the source side of `mnemobus migrate`)."""
        return await self._read(lambda c: [GroupId(g) for (g,) in c.execute(
            "SELECT group_id FROM episodes UNION SELECT group_id FROM entities UNION SELECT group_id FROM facts"
            " ORDER BY 1"
        )])

    async def export_group(self, group_id: GroupId) -> GroupExport:
        """Every row of the group as stored, embeddings and screening flags included, read in one snapshot."""
    
        def q(c: sqlite3.Connection) -> GroupExport:
            c.execute("BEGIN")  # one read snapshot: a concurrent ingest cannot split the export
            try:
                episodes = [
                    (_episode(r), bool(r[13]), _vector(r[14]))
                    for r in c.execute(
                        f"SELECT {_EPISODE_COLUMNS}, screened, embedding FROM episodes WHERE group_id = ?"
                        " ORDER BY reference_time, id", (group_id,)
                    )
                ]
                rows = c.execute(
                    "SELECT id, embedding FROM entities WHERE group_id = ? ORDER BY id", (group_id,)
                ).fetchall()
                loaded = _load_entities(c, group_id, [r[0] for r in rows]) if rows else []
                entities = [(e, _vector(r[1])) for e, r in zip(loaded, rows, strict=True)]
                facts = [
                    (_fact(r), _vector(r[-1]))
                    for r in c.execute(
                        f"SELECT {_FACT_COLUMNS}, f.embedding FROM {_FACT_FROM} WHERE f.group_id = ?"
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
            txn = SqliteTxn(self, conn)
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
        txn = SqliteTxn(self, c, inline=True)
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
        fails with one (it took ~20-50 ms every hundred recalls when it ran inline)."""
        with self._pending_lock:
            for fid in fact_ids:
                self._pending_retrievals[fid] = self._pending_retrievals.get(fid, 0) + 1
            backlog = len(self._pending_retrievals)
            start = backlog >= 1000 and not self._closed and (
                self._count_writer is None or not self._count_writer.is_alive())
            if start:
                self._count_writer = threading.Thread(target=self._write_counts, name="retrieval-counts", daemon=True)
                self._count_writer.start()

    def _write_counts(self) -> None:
        flushed: dict[str, int] = {}
        try:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
                flushed = self._flush_retrievals_in(conn)
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
        return await self._read(
            lambda c: fts_search(c, table, group_id, terms, limit, where, params, counts=self.term_counts))

    async def search_facts_text(self, group_id: GroupId, terms: Sequence[str], as_of: datetime, limit: int) -> list[Hit]:
        where = "AND (x.valid_at IS NULL OR x.valid_at <= :t) AND (x.invalid_at IS NULL OR x.invalid_at > :t)"
        return await self._fts("facts_fts", group_id, terms, limit, where=where, params={"t": _ts(as_of)})

    async def search_entities_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._fts("entities_fts", group_id, terms, limit)

    async def search_episodes_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._fts("episodes_fts", group_id, terms, limit)

    async def _vector(self, table: str, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        if limit <= 0:
            return []
        return await self._read(
            lambda c: [Hit(i, s) for i, s, _ in self.vectors.search_rows(c, table, group_id, np.asarray(vector), limit)]
        )

    async def search_facts_vector(self, group_id: GroupId, vector: Vector, as_of: datetime, limit: int) -> list[Hit]:
        if limit <= 0:
            return []
        t = _ts(as_of)

        def q(c: sqlite3.Connection) -> list[Hit]:
            # most stored facts are still valid: ask for twice the limit, and widen only when too few were
            wanted = limit * 2
            self._graph(c, group_id)  # before the vectors too: a deletion elsewhere drops them (see __init__)
            while True:
                hits = self.vectors.search_rows(c, "facts", group_id, np.asarray(vector), wanted)
                if not hits:
                    return []
                # after the vectors: it holds every row they returned (in run_reads one snapshot serves both reads)
                graph = self._graph(c, group_id)
                with graph.lock:
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
        t = _ts(as_of)

        def q(c: sqlite3.Connection) -> list[Step]:
            graph = self._graph(c, group_id)
            with graph.lock:
                return [Step(*step) for step in graph.walk(entity_ids, t, max_hops, relations, edge_types, limit)]

        return await self._read(q)

    async def warm(self, max_groups: int) -> list[GroupId]:
        """Most recently written groups first (the newest episode rowid of each), each loaded whole (its graph and
        its three vector matrices), until `max_groups` or until the vectors fill nine tenths of their budget."""

        def q(c: sqlite3.Connection) -> list[GroupId]:
            recent = [GroupId(g) for (g,) in c.execute(
                "SELECT group_id FROM episodes GROUP BY group_id ORDER BY max(rowid) DESC LIMIT ?", (max_groups,))]
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
                f"SELECT {_FACT_COLUMNS} FROM {_FACT_FROM} WHERE +f.group_id = ? AND f.id IN ({marks})", (group_id, *ids)
            ).fetchall()
            # retrievals not yet flushed still count: reads in this process see their own increments
            by_id = {r[0]: _fact(r, self._pending_retrievals) for r in rows}
            return [by_id[i] for i in ids if i in by_id]

        return await self._read(q)

    async def fact_standings(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Standing]:
        """From the group's in-memory graph: what recall weighs ~30 candidates a group by (a whole fact joins
        two entities and gathers its provenance)."""
        ids = list(dict.fromkeys(fact_ids))
        if not ids:
            return []

        def q(c: sqlite3.Connection) -> list[Standing]:
            graph = self._graph(c, group_id)
            with graph.lock:
                return graph.standings(ids, self._pending_retrievals)

        return await self._read(q)

    async def get_entities(self, group_id: GroupId, entity_ids: Sequence[str]) -> list[Entity]:
        ids = list(dict.fromkeys(entity_ids))
        if not ids:
            return []
        return await self._read(lambda c: _load_entities(c, group_id, ids))

    async def facts_valid_at(self, group_id: GroupId, as_of: datetime, limit: int = 1000) -> list[Fact]:
        def q(c: sqlite3.Connection) -> list[Fact]:
            rows = c.execute(
                f"SELECT {_FACT_COLUMNS} FROM {_FACT_FROM} WHERE f.group_id = :g AND {_VALID_AT}"
                " ORDER BY coalesce(f.valid_at, -1e18), f.id LIMIT :k",
                {"g": group_id, "t": _ts(as_of), "k": limit},
            ).fetchall()
            return [_fact(r) for r in rows]

        return await self._read(q)

    async def edge_history(self, group_id: GroupId, subject_id: str, relation: str | None = None) -> list[Fact]:
        def q(c: sqlite3.Connection) -> list[Fact]:
            # +group_id: filtered by value, so the planner takes the subject index (a group index reads the group)
            sql = f"SELECT {_FACT_COLUMNS} FROM {_FACT_FROM} WHERE +f.group_id = ? AND f.subject_id = ?"
            params: list[Any] = [group_id, subject_id]
            if relation is not None:
                sql += " AND f.relation = ?"
                params.append(relation)
            sql += " ORDER BY coalesce(f.valid_at, -1e18) DESC, f.created_at DESC"
            return [_fact(r) for r in c.execute(sql, params).fetchall()]

        return await self._read(q)

    # -- bulk loading (benchmarks, imports) -------------------------------------------------

    def bulk_load_sync(self, entities: Sequence[tuple[Entity, Vector | None]],
                       facts: Sequence[tuple[Fact, Vector | None]]) -> None:
        """Load pre-resolved rows in one transaction, bypassing resolution: for benchmarks and imports only."""
        with immediate(self._writer_conn()) as c:
            for entity, vec in entities:
                _insert_entity(c, entity, vec)
            for fact, vec in facts:
                _insert_fact(c, fact, vec)


def _load_entities(c: sqlite3.Connection, group_id: str, ids: list[str]) -> list[Entity]:
    marks = ",".join("?" * len(ids))
    rows = c.execute(
        "SELECT id, group_id, name, canonical_name, type, summary, confidence, first_seen, last_seen"
        f" FROM entities WHERE +group_id = ? AND id IN ({marks})",
        (group_id, *ids),
    ).fetchall()
    aliases: dict[str, list[str]] = {}
    for eid, alias in c.execute(
        f"SELECT entity_id, alias FROM aliases WHERE +group_id = ? AND entity_id IN ({marks}) ORDER BY alias",
        (group_id, *ids),
    ):
        aliases.setdefault(eid, []).append(alias)
    by_id = {r[0]: _entity(r, tuple(aliases.get(r[0], ()))) for r in rows}
    return [by_id[i] for i in ids if i in by_id]


def _vector(blob: bytes | None) -> Vector | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32).copy()


def _drop_facts(c: sqlite3.Connection, group_id: str, fact_ids: Sequence[str]) -> int:
    """Delete the group's facts by id with their provenance; the facts each had superseded are valid again
    (what ended them is gone). Returns how many there were."""
    dropped = 0
    for fid in fact_ids:
        c.execute(
            "UPDATE facts SET invalid_at = NULL, expired_at = NULL, superseded_by = NULL"
            " WHERE superseded_by = ? AND group_id = ?", (fid, group_id),
        )
        c.execute("DELETE FROM facts_fts WHERE rowid = (SELECT rowid FROM facts WHERE id = ? AND group_id = ?)",
                  (fid, group_id))
        if c.execute("DELETE FROM facts WHERE id = ? AND group_id = ?", (fid, group_id)).rowcount:
            c.execute("DELETE FROM fact_sources WHERE fact_id = ?", (fid,))
            dropped += 1
    return dropped


def _delete_episode(c: sqlite3.Connection, group_id: str, episode_id: str) -> DeleteCounts:
    row = c.execute("SELECT rowid FROM episodes WHERE id = ? AND group_id = ?", (episode_id, group_id)).fetchone()
    if row is None:
        return DeleteCounts()
    sourced = [fid for (fid,) in c.execute(
        "SELECT fs.fact_id FROM fact_sources fs JOIN facts f ON f.id = fs.fact_id"
        " WHERE fs.episode_id = ? AND f.group_id = ?", (episode_id, group_id))]
    c.execute("DELETE FROM fact_sources WHERE episode_id = ?", (episode_id,))
    orphans = [fid for fid in sourced
               if c.execute("SELECT 1 FROM fact_sources WHERE fact_id = ? LIMIT 1", (fid,)).fetchone() is None]
    _drop_facts(c, group_id, orphans)
    mentioned = [eid for (eid,) in c.execute("SELECT entity_id FROM episode_entities WHERE episode_id = ?", (episode_id,))]
    c.execute("DELETE FROM episode_entities WHERE episode_id = ?", (episode_id,))
    entities = 0
    for eid in mentioned:
        still_used = c.execute(
            "SELECT 1 FROM episode_entities WHERE entity_id = ? UNION ALL SELECT 1 FROM facts WHERE subject_id = ?"
            " UNION ALL SELECT 1 FROM facts WHERE object_id = ? LIMIT 1", (eid, eid, eid),
        ).fetchone()
        if still_used is None:
            c.execute("DELETE FROM aliases WHERE group_id = ? AND entity_id = ?", (group_id, eid))
            c.execute("DELETE FROM entities_fts WHERE rowid = (SELECT rowid FROM entities WHERE id = ?)", (eid,))
            entities += c.execute("DELETE FROM entities WHERE id = ? AND group_id = ?", (eid, group_id)).rowcount
    c.execute("DELETE FROM episodes_fts WHERE rowid = ?", (row[0],))
    c.execute("DELETE FROM episodes WHERE rowid = ?", (row[0],))
    return DeleteCounts(episodes=1, entities=entities, facts=len(orphans))


def _entity_fts_body(c: sqlite3.Connection, group_id: str, entity_id: str, name: str) -> str:
    aliases = [a for (a,) in c.execute("SELECT alias FROM aliases WHERE group_id = ? AND entity_id = ?", (group_id, entity_id))]
    return " ".join(dict.fromkeys([name, *aliases]))


def _insert_entity(c: sqlite3.Connection, e: Entity, vec: Vector | None) -> None:
    if c.execute("SELECT 1 FROM entities WHERE id = ?", (e.id,)).fetchone() is not None:
        raise StoreIntegrityError(f"entity {e.id} is already stored")
    cur = c.execute(
        "INSERT INTO entities(id, group_id, name, canonical_name, type, summary, confidence, first_seen, last_seen,"
        " embedding) VALUES (?,?,?,?,?,?,?,?,?,?)",
        (e.id, e.group_id, e.name, e.canonical_name, e.type, e.summary, e.confidence, _ts(e.first_seen),
         _ts(e.last_seen), _blob(vec)),
    )
    rowid = cur.lastrowid
    for alias in dict.fromkeys((e.canonical_name, *e.aliases)):
        c.execute("INSERT OR IGNORE INTO aliases(group_id, alias, type, entity_id) VALUES (?,?,?,?)",
                  (e.group_id, alias, e.type, e.id))
    c.execute(
        "INSERT INTO entities_fts(rowid, gtok, body) VALUES (?,?,?)",
        (rowid, group_token(e.group_id), _entity_fts_body(c, e.group_id, e.id, e.name)),
    )


def _insert_fact(c: sqlite3.Connection, f: Fact, vec: Vector | None) -> None:
    if c.execute("SELECT 1 FROM facts WHERE id = ?", (f.id,)).fetchone() is not None:
        raise StoreIntegrityError(f"fact {f.id} is already stored")
    cur = c.execute(
        "INSERT INTO facts(id, group_id, subject_id, object_id, relation, edge_type, fact, confidence, valid_at,"
        " invalid_at, created_at, expired_at, superseded_by, last_seen, retrieval_count, embedding)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (f.id, f.group_id, f.subject_id, f.object_id, f.relation, f.edge_type, f.fact, f.confidence,
         _ts(f.valid_at), _ts(f.invalid_at), _ts(f.created_at), _ts(f.expired_at), f.superseded_by,
         _ts(f.last_seen), f.retrieval_count, _blob(vec)),
    )
    body = f"{f.fact} {f.subject_name} {f.relation.replace('_', ' ')} {f.object_name}"
    c.execute("INSERT INTO facts_fts(rowid, gtok, body) VALUES (?,?,?)", (cur.lastrowid, group_token(f.group_id), body))
    for episode_id, message_id in zip(f.episode_ids, f.source_message_ids, strict=False):
        c.execute(
            "INSERT OR IGNORE INTO fact_sources(fact_id, episode_id, source_message_id) VALUES (?,?,?)",
            (f.id, episode_id, message_id),
        )


class _InlineReads(SqliteStore):
    """The same store (its very attribute dict), with reads run on the calling worker thread."""

    def __init__(self, store: SqliteStore) -> None:  # noqa: D107 - shares state rather than initialising it
        self.__dict__ = store.__dict__

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return fn(self._local.conn)

    async def mark_retrieved(self, group_id: GroupId, fact_ids: Sequence[str]) -> None:
        raise RuntimeError("mark_retrieved may write: call it outside run_reads")


def _complete(coro: Awaitable[T]) -> T:
    """Run a coroutine that never suspends to its end, on the calling thread.

    The works given to `run_transactions` await only an inline SqliteTxn,
    whose methods return without suspending, so one `send` finishes them.
    """
    if not isinstance(coro, Coroutine):
        raise TypeError(f"a transaction work must be a coroutine, got {type(coro).__name__}")
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a one-hop transaction awaited something other than its WriteTxn")


class SqliteTxn:
    """The WriteTxn of SqliteStore: every call runs on the writer connection inside BEGIN IMMEDIATE.

    Inline transactions (from `run_transactions`) already run on a worker
    thread and call SQLite directly; the others hop to a thread per call.
    """

    def __init__(self, store: SqliteStore, conn: sqlite3.Connection, *, inline: bool = False) -> None:
        self._store = store
        self._c = conn
        self._inline = inline
        self.groups: set[str] = set()

    async def _do(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._inline:
            return fn(self._c)
        return await self._store._run(lambda: fn(self._c))

    async def insert_episode(self, episode: Episode, *, screened: bool, embedding: Vector | None) -> bool:
        e = episode

        def w(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                f"INSERT OR IGNORE INTO episodes({_EPISODE_COLUMNS}, screened, embedding)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (e.id, e.group_id, e.content, e.role, e.source_message_id, _ts(e.reference_time), e.response,
                 e.agent_id, e.platform, e.channel_id, _ts(e.created_at or datetime.now(UTC)), e.speaker, e.name,
                 int(screened),
                 None if screened else _blob(embedding)),
            )
            if cur.rowcount == 0:
                owner = c.execute("SELECT group_id FROM episodes WHERE id = ?", (e.id,)).fetchone()[0]
                if owner != e.group_id:
                    raise episode_id_taken(e.id, e.group_id, owner)
                return False
            if screened:  # kept for audit, never searchable: it must not reach a prompt as memory
                return True
            body = e.content if not e.response else f"{e.content}\n{e.response}"
            c.execute(
                "INSERT INTO episodes_fts(rowid, gtok, body) VALUES (?,?,?)",
                (cur.lastrowid, group_token(e.group_id), body),
            )
            return True

        return await self._do(w)

    async def entity_by_alias(self, group_id: GroupId, alias: str, types: Sequence[str] | None = None) -> Entity | None:
        def r(c: sqlite3.Connection) -> Entity | None:
            rows = [(t, eid) for t, eid in c.execute(
                "SELECT a.type, a.entity_id FROM aliases a JOIN entities e ON e.id = a.entity_id"
                " WHERE a.group_id = ? AND a.alias = ? ORDER BY e.first_seen, e.id", (group_id, alias))
                if types is None or t in types]
            if not rows:
                return None
            found = _load_entities(c, group_id, [pick_by_type(rows, types)])
            return found[0] if found else None

        return await self._do(r)

    async def similar_entities(self, group_id: GroupId, vector: Vector, k: int) -> list[tuple[Entity, float]]:
        self.groups.add(group_id)

        def r(c: sqlite3.Connection) -> list[tuple[Entity, float]]:
            hits = self._store.vectors.search(c, "entities", group_id, np.asarray(vector), k)
            entities = {e.id: e for e in _load_entities(c, group_id, [h[0] for h in hits])} if hits else {}
            return [(entities[i], s) for i, s in hits if i in entities]

        return await self._do(r)

    async def insert_entity(self, entity: Entity, embedding: Vector | None) -> None:
        await self._do(lambda c: _insert_entity(c, entity, embedding))

    async def observe_entity(self, group_id: GroupId, entity_id: str, *, name: str, alias: str, seen: datetime) -> None:
        t = _ts(seen)

        def w(c: sqlite3.Connection) -> None:
            row = c.execute("SELECT rowid FROM entities WHERE id = ? AND group_id = ?", (entity_id, group_id)).fetchone()
            if row is None:
                raise StoreIntegrityError(f"entity {entity_id} is not in group {group_id}")
            c.execute(
                "UPDATE entities SET name = ?, last_seen = max(coalesce(last_seen, ?), ?),"
                " first_seen = min(coalesce(first_seen, ?), ?) WHERE id = ?",
                (name, t, t, t, t, entity_id),
            )
            c.execute("INSERT OR IGNORE INTO aliases(group_id, alias, type, entity_id)"
                      " SELECT ?, ?, type, id FROM entities WHERE id = ?", (group_id, alias, entity_id))
            c.execute("DELETE FROM entities_fts WHERE rowid = ?", (row[0],))
            c.execute(
                "INSERT INTO entities_fts(rowid, gtok, body) VALUES (?,?,?)",
                (row[0], group_token(group_id), _entity_fts_body(c, group_id, entity_id, name)),
            )

        await self._do(w)

    async def link_episode_entity(self, group_id: GroupId, episode_id: str, entity_id: str) -> None:
        await self._do(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO episode_entities(episode_id, entity_id) VALUES (?,?)", (episode_id, entity_id)
            )
        )

    async def facts_between(self, group_id: GroupId, subject_id: str, relation: str) -> list[Fact]:
        def r(c: sqlite3.Connection) -> list[Fact]:
            rows = c.execute(
                f"SELECT {_FACT_COLUMNS} FROM {_FACT_FROM} WHERE +f.group_id = ? AND f.subject_id = ? AND f.relation = ?"
                " ORDER BY coalesce(f.valid_at, -1e18), f.created_at, f.id",
                (group_id, subject_id, relation),
            ).fetchall()
            return [_fact(x) for x in rows]

        return await self._do(r)

    async def insert_fact(self, fact: Fact, embedding: Vector | None) -> None:
        def w(c: sqlite3.Connection) -> None:
            found = c.execute(
                "SELECT count(*) FROM entities WHERE +group_id = ? AND id IN (?, ?)",
                (fact.group_id, fact.subject_id, fact.object_id),
            ).fetchone()[0]
            if found != len({fact.subject_id, fact.object_id}):
                raise StoreIntegrityError(f"fact {fact.id} names an entity that is not in group {fact.group_id}")
            _insert_fact(c, fact, embedding)

        await self._do(w)

    async def update_fact(self, fact: Fact) -> None:
        f = fact

        def w(c: sqlite3.Connection) -> None:
            cur = c.execute(
                "UPDATE facts SET confidence = ?, last_seen = ?, valid_at = ?, invalid_at = ?, expired_at = ?,"
                " superseded_by = ? WHERE id = ? AND group_id = ?",
                (f.confidence, _ts(f.last_seen), _ts(f.valid_at), _ts(f.invalid_at), _ts(f.expired_at),
                 f.superseded_by, f.id, f.group_id),
            )
            if cur.rowcount != 1:
                raise StoreIntegrityError(f"fact {f.id} is not in group {f.group_id}")

        await self._do(w)

    async def add_fact_source(self, group_id: GroupId, fact_id: str, episode_id: str, source_message_id: str) -> None:
        await self._do(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO fact_sources(fact_id, episode_id, source_message_id) VALUES (?,?,?)",
                (fact_id, episode_id, source_message_id),
            )
        )
