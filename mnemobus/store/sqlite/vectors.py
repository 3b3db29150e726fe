"""In-memory per-group vector matrices for the SQLite store, rebuilt from the file on demand.

The SQLite file is the source of truth: each matrix is loaded lazily from the
embedding column, topped up incrementally when newer rows appear (also rows
written by another process), and evicted least-recently-used under a byte
budget, so a million facts over a thousand groups never all sit in RAM.

Search is an exact dot product for groups under `ann_min_rows` (the common
case: exact answers, identical to the other backend's). A larger group gets
an approximate index (faiss IVF over half-precision vectors), built
from the matrix in a background thread while exact scans keep answering, and
topped up with new rows as they arrive. Its scores are its half-precision
ones, within 1e-4 of the float32 cosine (1e-5 typical at 384 dimensions).
Why IVF and not HNSW: measured on 100k x 384 here, an HNSW build (usearch)
took minutes on 2 busy cores, an IVF build seconds, for sub-millisecond
queries and ~0.99 recall@40 either way; IVF also adds rows cheaply.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mnemobus.shared.logthrottle import ThrottledLog
from mnemobus.store.sqlite import on_loop
from mnemobus.store.vectors import ANN_MIN_ROWS, RESCORE_FACTOR, IvfIndex, built_index, grown, single_threaded_blas, top_k, top_up_or_rebuild

log = logging.getLogger(__name__)

_TABLES = frozenset({"facts", "entities", "episodes"})


class _Unknown:
    """The newest rowid not read yet: the matrix asks the file itself."""


UNKNOWN = _Unknown()


@dataclass
class _Matrix:
    dim: int
    ids: list[str] = field(default_factory=list)
    rowids: list[int] = field(default_factory=list)  # SQLite rowids: follow-up lookups skip the text-id index
    rows: np.ndarray | None = None  # float32 (capacity, dim)
    size: int = 0
    max_rowid: int = 0
    ann: IvfIndex | None = None
    building: bool = False

    @property
    def nbytes(self) -> int:
        return (0 if self.rows is None else int(self.rows.nbytes)) + (self.ann.nbytes if self.ann else 0)

    def append(self, ids: list[str], rowids: list[int], vectors: np.ndarray, max_rowid: int) -> None:
        if not ids:
            return
        need = self.size + len(ids)
        self.rows = grown(self.rows, self.size, need, (self.dim,), np.float32)
        self.rows[self.size : need] = vectors
        self.ids.extend(ids)
        self.rowids.extend(rowids)
        self.size = need
        self.max_rowid = max(self.max_rowid, max_rowid)


class VectorCache:
    """Thread-safe: each search refreshes and reads its matrix under one lock per (table, group)."""

    def __init__(self, dim: int, budget_bytes: int, *, ann_min_rows: int = ANN_MIN_ROWS,
                 background: bool = True) -> None:
        single_threaded_blas()
        self.dim = dim
        self.budget = budget_bytes
        self.ann_min_rows = ann_min_rows
        self.background = background  # False builds indexes inline (tests; predictable latency)
        self._builders: list[threading.Thread] = []
        self._mats: OrderedDict[tuple[str, str], _Matrix] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}
        self._crowded_log = ThrottledLog(log)  # a group too large for the budget is met at every recall: 1 line/10 s
        self.crowded_observers: list[Callable[[str], None]] = []  # told each table evicted for its own group

    def _key_lock(self, key: tuple[str, str]) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def drop_group(self, group_id: str) -> None:
        with self._lock:
            for key in [k for k in self._mats if k[1] == group_id]:
                del self._mats[key]

    def _refresh(self, conn: sqlite3.Connection, table: str, group_id: str, mat: _Matrix,
                 latest: int | None | _Unknown = UNKNOWN) -> None:
        if isinstance(latest, _Unknown):
            latest = conn.execute(f"SELECT max(rowid) FROM {table} WHERE group_id = ?", (group_id,)).fetchone()[0]
        if latest is None or latest <= mat.max_rowid:
            return
        rows = conn.execute(
            f"SELECT rowid, id, embedding FROM {table} WHERE group_id = ? AND rowid > ? AND embedding IS NOT NULL"
            " ORDER BY rowid",
            (group_id, mat.max_rowid),
        ).fetchall()
        if not rows:
            mat.max_rowid = latest
            return
        blob = b"".join(r[2] for r in rows)
        vectors = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), self.dim)
        mat.append([r[1] for r in rows], [r[0] for r in rows], vectors, max(latest, rows[-1][0]))

    def search(self, conn: sqlite3.Connection, table: str, group_id: str, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The k nearest rows of the group: (id, cosine), best first."""
        return [(i, score) for i, score, _ in self.search_rows(conn, table, group_id, query, k)]

    def search_rows(self, conn: sqlite3.Connection, table: str, group_id: str, query: np.ndarray,
                    k: int, latest: int | None | _Unknown = UNKNOWN) -> list[tuple[str, float, int]]:
        """As `search`, with each row's SQLite rowid: (id, cosine, rowid). `latest`: the group's newest rowid in
        the table as this connection's snapshot already read it (`group_state.py`), None when it has no row."""
        key = (table, group_id)
        with on_loop.held(self._key_lock(key)):
            mat, held = self._current(conn, table, group_id, latest)
            if mat.size == 0 or k <= 0:
                return []
            q = query.astype(np.float32, copy=False)
            self._maintain_index(key, mat)
            if mat.ann is not None and k * RESCORE_FACTOR < mat.size:
                # its own half-precision scores, not re-scored from the float32 rows: re-reading k rows of a matrix
                # the request finds cold cost more than the search (docs/performance.md, after stop 55)
                top, scores = mat.ann.nearest(q, k)
            else:
                sims = mat.rows[: mat.size] @ q
                top = top_k(sims, k)
                scores = sims[top]
            # positions and scores as Python numbers at once: indexing numpy arrays item by item is slow
            ids, rowids = mat.ids, mat.rowids
            result = [(ids[i], s, rowids[i]) for i, s in zip(top.tolist(), scores.tolist())]
            grew = mat.nbytes != held
        if grew:  # only growth can pass the budget, so a search that grew nothing skips summing every group's size
            self._evict(group_id)
        return result

    def _current(self, conn: sqlite3.Connection, table: str, group_id: str,
                 latest: int | None | _Unknown = UNKNOWN) -> tuple[_Matrix, int]:
        """Under the key lock: the group's matrix with every committed row, and its size in bytes before."""
        if table not in _TABLES:
            raise ValueError(f"no vectors for table {table!r}")
        key = (table, group_id)
        with self._lock:
            mat = self._mats.get(key)
            if on_loop.active() and latest is not None:  # a group's rows to read first: on a thread
                if mat is None:
                    on_loop.stall("cold")
                if isinstance(latest, int):
                    on_loop.catch_up(latest - mat.max_rowid)
            if mat is None:
                mat = self._mats[key] = _Matrix(self.dim)
            self._mats.move_to_end(key)
        held = mat.nbytes
        self._refresh(conn, table, group_id, mat, latest)
        return mat, held

    def load(self, conn: sqlite3.Connection, table: str, group_id: str) -> int:
        """Read the group's rows of the table into memory now (and start its index when it is large); its bytes."""
        key = (table, group_id)
        with self._key_lock(key):
            mat, _ = self._current(conn, table, group_id)
            self._maintain_index(key, mat)
        self._evict()
        return mat.nbytes

    def held_bytes(self) -> int:
        with self._lock:
            return sum(m.nbytes for m in self._mats.values())

    def _maintain_index(self, key: tuple[str, str], mat: _Matrix) -> None:
        """Called under the key lock: top the index up, or start (re)building it when the group outgrew it."""
        if not top_up_or_rebuild(mat.ann, mat.rows, mat.size, building=mat.building, min_rows=self.ann_min_rows):
            return
        mat.building = True
        rows, n = mat.rows, mat.size  # appends never touch rows[:n], and a grown matrix is a new array

        def build() -> None:
            index = built_index(rows[:n], str(key))  # type: ignore[index]
            if index is None:
                mat.building = False
                return
            with self._key_lock(key):
                if mat.rows is not None and mat.size >= n:
                    index.add(mat.rows[n : mat.size])
                    mat.ann = index
                mat.building = False
            self._evict(key[1])  # the index adds to what the cache holds

        if not self.background:
            mat.building = False
            mat.ann = IvfIndex(rows[:n])  # type: ignore[index]
            return
        # not a daemon: the interpreter waits for a build at exit instead of tearing numpy down under it (a
        # process that exited mid-build died with SIGSEGV after its work was done: bench-graph-latency, rc 139)
        thread = threading.Thread(target=build, name=f"vector-index-{key[0]}")
        self._builders = [t for t in self._builders if t.is_alive()] + [thread]
        thread.start()

    def wait_for_indexes(self, timeout: float | None = None) -> None:
        """Block until background index builds finish (benchmarks and tests that want the indexed path)."""
        for thread in list(self._builders):
            thread.join(timeout)

    def _evict(self, grown_group: str | None = None) -> None:
        """Least recently used first, down to the budget. A matrix of the group that just grew evicted means the
        budget cannot hold that group's matrices: each recall then re-reads one from the file and exact-scans it
        while its index is rebuilt (10x the latency at 100k facts and turns, issue 37), so that is said."""
        crowded: list[str] = []
        with self._lock:
            total = sum(m.nbytes for m in self._mats.values())
            while total > self.budget and len(self._mats) > 1:
                (table, group), mat = self._mats.popitem(last=False)
                total -= mat.nbytes
                if group == grown_group:
                    crowded.append(table)
        for table in crowded:
            for observe in self.crowded_observers:
                observe(table)
        if crowded:
            self._crowded_log.warning("vector_cache_crowded", "store.vector_cache_mb (%g MB) cannot hold the vectors of "
                                 "group %s: its %s matrix was evicted to make room for its own, and is read from "
                                 "the file again at its next search; raise store.vector_cache_mb",
                                 round(self.budget / 2**20, 1), grown_group, "/".join(crowded))
