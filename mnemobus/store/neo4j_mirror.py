"""In-process mirror of each Neo4j group's searchable rows: embeddings, fact validity and fact edges.

Why: on Neo4j 5.26 (2 cores) one vector-index query cost 20-40 ms at 100k facts and an
exact in-database scan ~30 us a row, while the same search over a float32 matrix in
this process is one matrix product (an IVF index past `ANN_MIN_ROWS` rows, as the
SQLite store does). The graph walk of a recall is a dictionary lookup here instead of
a round trip. Neo4j stays the source of truth: every write transaction increments the
group's version (a `GroupVersion` node) and stamps the rows it writes with it, so a
mirror catches up by reading only rows stamped after its own version; a deletion
changes the group's `epoch`, which makes mirrors reload the group from scratch.

Only what search and walk need is held: ids, embeddings, and for facts the validity
interval, confidence, endpoints, relation and edge type. Rows are read from Neo4j.

Used from the event loop's thread only, except index builds, which run on a worker
thread over a snapshot of a table's rows; each table's lock keeps the two apart
(see `_Table.maintain_index`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnemobus.store.vectors import (
    RESCORE_FACTOR, IvfIndex, built_index, grown, single_threaded_blas, top_k, top_up_or_rebuild,
)

log = logging.getLogger(__name__)

ALWAYS = np.iinfo(np.int64).min  # valid_at None: valid since forever
NEVER = np.iinfo(np.int64).max  # invalid_at None: valid for ever
MAX_TIED = 1000  # rows level with the k-th best that are still ordered by id
ROW_OVERHEAD_BYTES = 300  # Python objects per row beside the matrix (id string, dict slot, edge lists), measured roughly
KINDS = ("fact", "entity", "episode")
Valid = Callable[[np.ndarray], np.ndarray]  # row positions -> which of them may be returned

# What a mirror reads from Neo4j, per kind: constant Cypher, parameters only. LOAD reads the whole group
# (rows written before versions existed have none), DELTA the rows stamped after `$since` (a range seek on
# the (group_id, ver) index, named in a hint: left to itself the planner picked the group_id index and read
# every row of the group to filter on ver).
# Times travel as epoch microseconds, as elsewhere in the store.
_US = "{p}.epochSeconds * 1000000 + {p}.microsecond"
_FACT_COLUMNS = (
    f"RETURN r.id AS id, r.embedding AS v, {_US.format(p='r.valid_at')} AS va, {_US.format(p='r.invalid_at')} AS ia, "
    "r.confidence AS c, r.subject_id AS s, r.object_id AS o, r.relation AS rel, r.edge_type AS et"
)
LOAD: dict[str, str] = {
    "fact": "MATCH ()-[r:FACT]->() WHERE r.group_id = $g " + _FACT_COLUMNS,
    "entity": "MATCH (n:Entity) WHERE n.group_id = $g AND n.embedding IS NOT NULL RETURN n.id AS id, n.embedding AS v",
    "episode": "MATCH (n:Episode) WHERE n.group_id = $g AND n.embedding IS NOT NULL RETURN n.id AS id, n.embedding AS v",
}
DELTA: dict[str, str] = {
    "fact": "MATCH ()-[r:FACT]->() USING INDEX r:FACT(group_id, ver) WHERE r.group_id = $g AND r.ver > $since "
            + _FACT_COLUMNS,
    "entity": "MATCH (n:Entity) USING INDEX n:Entity(group_id, ver) WHERE n.group_id = $g AND n.ver > $since "
              "AND n.embedding IS NOT NULL RETURN n.id AS id, n.embedding AS v",
    "episode": "MATCH (n:Episode) USING INDEX n:Episode(group_id, ver) WHERE n.group_id = $g AND n.ver > $since "
               "AND n.embedding IS NOT NULL RETURN n.id AS id, n.embedding AS v",
}
LOAD_COLUMNS: dict[str, tuple[str, ...]] = {
    "fact": ("id", "v", "va", "ia", "c", "s", "o", "rel", "et"), "entity": ("id", "v"), "episode": ("id", "v"),
}


class _Table:
    """One kind's rows of one group: ids, their positions, float32 embeddings (rows without one are masked out)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.rows: np.ndarray | None = None
        self.has_vec: np.ndarray | None = None
        self.size = 0
        self.ann: IvfIndex | None = None
        self.building = False
        self.lock = threading.Lock()  # between a finished index build and the event loop

    @property
    def nbytes(self) -> int:
        held = 0 if self.rows is None else int(self.rows.nbytes)
        return held + self.size * ROW_OVERHEAD_BYTES + (self.ann.nbytes if self.ann else 0)

    def _slot(self, row_id: str) -> int:
        """The row's position, appending a new (masked) row for an id not held yet."""
        i = self.pos.get(row_id)
        if i is not None:
            return i
        i = self.size
        self.rows = grown(self.rows, i, i + 1, (self.dim,), np.float32)
        self.has_vec = grown(self.has_vec, i, i + 1, (), np.bool_)
        self._grow_columns(i + 1)
        self.rows[i] = 0.0
        self.has_vec[i] = False
        self.ids.append(row_id)
        self.pos[row_id] = i
        self.size = i + 1
        return i

    def _grow_columns(self, need: int) -> None:
        """Kinds with more per-row fields grow them here."""

    def put(self, row_id: str, vector: Sequence[float] | None) -> int:
        i = self._slot(row_id)
        if vector is not None and not self.has_vec[i]:  # type: ignore[index]
            self.rows[i] = vector  # type: ignore[index]
            self.has_vec[i] = True  # type: ignore[index]
        return i

    def search(self, query: np.ndarray, k: int, valid: Valid | None = None) -> list[tuple[str, float]]:
        """The k nearest rows with an embedding (and, when `valid` is given, for which valid(positions) holds)."""
        if self.size == 0 or k <= 0:
            return []
        q = query.astype(np.float32, copy=False)
        with self.lock:
            ann = self.ann
        if ann is not None and k * RESCORE_FACTOR < ann.size:
            found = self._search_ann(ann, q, k, valid)
            if found is not None:
                return found
        n = self.size
        keep = self.has_vec[:n]  # type: ignore[index]
        if valid is not None:
            keep = keep & valid(np.arange(n))
        sims = np.where(keep, self.rows[:n] @ q, -np.inf)  # type: ignore[index]
        return self._ranked(np.arange(n), sims, min(k, int(keep.sum())))

    def _ranked(self, positions: np.ndarray, sims: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The k best (id, score), ties by id: the order the server's `ORDER BY s DESC, id` gives."""
        best = top_k(sims, k)
        if not len(best):
            return []
        tied = np.flatnonzero(sims >= sims[best[-1]])  # all rows level with the k-th, not just those picked
        if len(tied) > k + MAX_TIED:  # a degenerate query (all scores equal): sorting every row by id is not worth it
            tied = best
        ranked = sorted(((self.ids[positions[i]], float(sims[i])) for i in tied), key=lambda x: (-x[1], x[0]))
        return ranked[:k]

    def _search_ann(self, ann: IvfIndex, q: np.ndarray, k: int, valid: Valid | None) -> list[tuple[str, float]] | None:
        """Approximate candidates rescored exactly; None when filtering leaves fewer than k (the exact scan answers)."""
        cand = ann.candidates(q, k * RESCORE_FACTOR)
        cand = cand[self.has_vec[cand]]  # type: ignore[index]
        if valid is not None:
            cand = cand[valid(cand)]
        if len(cand) < k:
            return None
        return self._ranked(cand, self.rows[cand] @ q, k)  # type: ignore[index]

    def maintain_index(self, background: bool) -> None:
        """Top the index up with appended rows, or (re)build it on a worker thread once the table outgrew it.

        Rows that gain an embedding after being appended without one stay out of the index (only facts
        can, and only through a full reload): the exact scan still finds them when the index cannot.
        """
        with self.lock:
            if not top_up_or_rebuild(self.ann, self.rows, self.size, building=self.building):
                return
            self.building = True
            rows, n = self.rows, self.size  # appends never touch rows[:n], and a grown matrix is a new array

        def build() -> None:
            index = built_index(rows[:n], "a Neo4j mirror table")  # type: ignore[index]
            with self.lock:
                if index is not None and self.rows is not None:
                    index.add(self.rows[n : self.size])
                    self.ann = index
                self.building = False

        if background:
            threading.Thread(target=build, name="neo4j-mirror-index", daemon=True).start()
        else:
            build()


class _FactTable(_Table):
    """Facts also keep what `walk` and the validity filter need, so neither asks the server."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.valid_at = np.empty(0, dtype=np.int64)
        self.invalid_at = np.empty(0, dtype=np.int64)
        self.confidence = np.empty(0, dtype=np.float64)
        self.ends: list[tuple[str, str]] = []
        self.kind: list[tuple[str, str]] = []  # (relation, edge_type)
        self.touching: dict[str, list[int]] = {}  # entity id -> facts with it as subject or object

    def _grow_columns(self, need: int) -> None:
        n = self.size
        self.valid_at = grown(self.valid_at, n, need, (), np.int64)
        self.invalid_at = grown(self.invalid_at, n, need, (), np.int64)
        self.confidence = grown(self.confidence, n, need, (), np.float64)

    def put_fact(self, row: dict[str, Any]) -> None:
        new = row["id"] not in self.pos
        i = self.put(row["id"], row["v"])
        va, ia = row["va"], row["ia"]
        self.valid_at[i] = ALWAYS if va is None else va
        self.invalid_at[i] = NEVER if ia is None else ia
        self.confidence[i] = float(row["c"])
        if new:  # endpoints, relation and type never change after a fact is written
            self.ends.append((row["s"], row["o"]))
            self.kind.append((row["rel"], row["et"]))
            for e in {row["s"], row["o"]}:
                self.touching.setdefault(e, []).append(i)

    def valid_at_time(self, t: int) -> Valid:
        """A filter of positions: the contract's validity, valid_at <= t < invalid_at."""
        return lambda pos: (self.valid_at[pos] <= t) & (t < self.invalid_at[pos])

    def walk(self, seeds: Sequence[str], t: int, max_hops: int, relations: Sequence[str] | None,
             edge_types: Sequence[str] | None, limit: int) -> list[tuple[str, int, float]]:
        """The server's walk over the held edges: (fact id, hop, confidence), nearest hops first.

        Within a hop facts by confidence (highest first) then id, at most `limit` in all,
        each fact once, each entity expanded once: what `Neo4jStore.walk` asks the server.
        """
        rels = set(relations) if relations else None
        types = set(edge_types) if edge_types else None
        seen: set[int] = set()
        visited: set[str] = set(seeds)
        frontier = list(dict.fromkeys(seeds))
        out: list[tuple[str, int, float]] = []
        for hop in range(1, max_hops + 1):
            if not frontier or len(out) >= limit:
                break
            found = {i for e in frontier for i in self.touching.get(e, ()) if i not in seen}
            found = {i for i in found if self.valid_at[i] <= t < self.invalid_at[i]
                     and (rels is None or self.kind[i][0] in rels) and (types is None or self.kind[i][1] in types)}
            nxt: list[str] = []
            for i in sorted(found, key=lambda i: (-self.confidence[i], self.ids[i]))[: limit - len(out)]:
                seen.add(i)
                out.append((self.ids[i], hop, float(self.confidence[i])))
                for e in self.ends[i]:
                    if e not in visited:
                        visited.add(e)
                        nxt.append(e)
            frontier = nxt
        return out


@dataclass
class GroupMirror:
    """One group's rows as of `version` in `epoch`; `checked_at` is when that version was last confirmed current
    (monotonic time the confirming read was issued), `written_at` when this process last wrote the group."""

    dim: int
    epoch: str | None
    version: int
    checked_at: float = float("-inf")
    written_at: float = float("-inf")
    facts: _FactTable = field(init=False)
    tables: dict[str, _Table] = field(init=False)

    def __post_init__(self) -> None:
        self.facts = _FactTable(self.dim)
        self.tables = {"fact": self.facts, "entity": _Table(self.dim), "episode": _Table(self.dim)}

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tables.values())

    def apply(self, kind: str, rows: Iterable[dict[str, Any]]) -> None:
        """Add or update rows; under the table's lock, so an index build never takes a row half written."""
        table = self.tables[kind]
        with table.lock:
            if kind == "fact":
                for row in rows:
                    self.facts.put_fact(row)
            else:
                for row in rows:
                    table.put(row["id"], row["v"])

    def maintain_indexes(self, background: bool) -> None:
        for table in self.tables.values():
            table.maintain_index(background)


class MirrorCache:
    """Group mirrors, least recently used evicted past a byte budget (a group larger than it is not kept)."""

    def __init__(self, dim: int, budget_bytes: int) -> None:
        single_threaded_blas()
        self.dim = dim
        self.budget = budget_bytes
        self._mirrors: OrderedDict[str, GroupMirror] = OrderedDict()

    def get(self, group_id: str) -> GroupMirror | None:
        mirror = self._mirrors.get(group_id)
        if mirror is not None:
            self._mirrors.move_to_end(group_id)
        return mirror

    def put(self, group_id: str, mirror: GroupMirror) -> bool:
        """Keep the mirror, evicting the least recently used; False when it alone exceeds the budget."""
        self._mirrors[group_id] = mirror
        self._mirrors.move_to_end(group_id)
        return self.evict()

    def evict(self) -> bool:
        """Drop least recently used mirrors until the budget holds; False when the newest had to go too."""
        total = sum(m.nbytes for m in self._mirrors.values())
        newest = next(reversed(self._mirrors), None)
        while total > self.budget and self._mirrors:
            gid, mirror = self._mirrors.popitem(last=False)
            total -= mirror.nbytes
            if gid == newest:
                return False
        return True

    def drop(self, group_id: str) -> None:
        self._mirrors.pop(group_id, None)

    def stale(self, group_id: str, now: float) -> None:
        """This process wrote the group: only a version read issued after `now` confirms the mirror again."""
        mirror = self._mirrors.get(group_id)
        if mirror is not None:
            mirror.checked_at = float("-inf")
            mirror.written_at = now

    def __contains__(self, group_id: str) -> bool:
        return group_id in self._mirrors
