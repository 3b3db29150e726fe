"""One group's facts as arrays in memory: what the graph walk, the validity filter and ranking read.

Why: a recall walks the graph, filters vector hits by validity and weighs ~30
candidates in each group. Asked of SQLite row by row, those three were a third
of a recall's time on 10k-fact groups, almost all of it statement overhead and
row decoding rather than work. Held here they are array lookups.

Backend-neutral: a store feeds rows in (`put`), keeps the graph current from
its own change stamps (SQLite: `sqlite/graph.py`), and drops it when rows are
deleted. Times are epoch seconds; a missing bound is -inf / +inf, so validity
is one comparison: valid_at <= t < invalid_at.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple

import numpy as np

from mnemobus.store.contract import Standing
from mnemobus.store.vectors import grown

_NONE: list[int] = []  # an entity no held fact touches (a list: an empty tuple as an index selects every row)

ROW_BYTES = 570  # per fact beside the arrays: id, sentence, dict and list slots, endpoints (tracemalloc, 10k facts)


class FactRow(NamedTuple):
    """The columns a store reads for the graph, in this order (plain tuples will do): times in epoch seconds,
    None when unset."""

    id: str
    fact: str
    confidence: float
    valid_at: float | None
    invalid_at: float | None
    created_at: float
    last_seen: float | None
    retrieval_count: int
    subject_id: str
    object_id: str
    relation: str
    edge_type: str


EPOCH = datetime.fromtimestamp(0, UTC)


def utc_from_seconds(seconds: float | None) -> datetime | None:
    """How both stores turn epoch seconds (None: unset) back into aware datetimes."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


class FactEdges:
    """The walk over a group's held facts, for any table that keeps these attributes by position.

    Shared by `FactGraph` (SQLite) and the Neo4j mirror's fact table, so both stores walk the same
    way. Times may be in any unit, as long as `t` is in the same one as `valid_at`/`invalid_at`.
    """

    ids: list[str]
    size: int
    valid_at: np.ndarray
    invalid_at: np.ndarray
    confidence: np.ndarray
    ends: list[tuple[str, str]]
    kind: list[tuple[str, str]]  # (relation, edge_type)
    touching: dict[str, list[int]]  # entity id -> facts with it as subject or object

    _id_keys: np.ndarray = np.empty(0, dtype=np.uint64)

    def _valid(self, positions: np.ndarray, t: float) -> np.ndarray:
        return (self.valid_at[positions] <= t) & (t < self.invalid_at[positions])

    def _lowest_ids(self, positions: np.ndarray, m: int) -> np.ndarray:
        """The m of the positions whose ids sort first (in no particular order).

        Picked by each id's first eight UTF-8 bytes as one unsigned integer, which orders as the strings do
        up to a shared prefix; whole strings are compared only when such a tie straddles the cut. A hub's
        thousands of equally confident facts made the string sort ~100 us a walk.
        """
        if m >= len(positions):
            return positions
        keys = self._keys()[positions]
        part = np.argpartition(keys, (m - 1, m))
        if keys[part[m - 1]] == keys[part[m]]:
            part = np.argsort(np.array([self.ids[i] for i in positions.tolist()]), kind="stable")
        return positions[part[:m]]

    def _keys(self) -> np.ndarray:
        """Every held id's order key; positions never change, so only appended ids are added."""
        n = len(self._id_keys)
        if n < self.size:
            fresh = np.fromiter((int.from_bytes(i.encode()[:8].ljust(8, b"\0"), "big") for i in self.ids[n:self.size]),
                                dtype=np.uint64, count=self.size - n)
            self._id_keys = np.concatenate([self._id_keys, fresh])
        return self._id_keys

    def walk(self, seeds: Sequence[str], t: float, max_hops: int, relations: Sequence[str] | None,
             edge_types: Sequence[str] | None, limit: int) -> list[tuple[str, int, float]]:
        """Breadth first over facts valid at t: (fact id, hop, confidence), nearest hops first.

        Within a hop facts by confidence (highest first) then id; each fact once, each entity
        expanded once, at most `limit` facts, and only the picked facts' far ends are walked on.
        """
        rels = set(relations) if relations else None
        types = set(edge_types) if edge_types else None
        seen = np.zeros(self.size, dtype=np.bool_)
        visited: set[str] = set(seeds)
        frontier = list(dict.fromkeys(seeds))
        out: list[tuple[str, int, float]] = []
        for hop in range(1, max_hops + 1):
            if not frontier or len(out) >= limit:
                break
            # each touched fact once, in position order: a mark per fact is cheaper than sorting (np.unique)
            marked = np.zeros(self.size, dtype=np.bool_)
            for e in frontier:
                marked[self.touching.get(e, _NONE)] = True
            found = np.flatnonzero(marked & ~seen)
            found = found[self._valid(found, t)]
            if rels is not None or types is not None:
                found = np.array([i for i in found.tolist() if (rels is None or self.kind[i][0] in rels)
                                  and (types is None or self.kind[i][1] in types)], dtype=np.int64)
            want = limit - len(out)
            if len(found) > want:  # only the best `want` need ordering: hubs ("User") touch thousands of facts
                conf = self.confidence[found]
                cut = -np.partition(-conf, want - 1)[want - 1]  # the want-th highest confidence
                better, tied = found[conf > cut], found[conf == cut]
                tied = self._lowest_ids(tied, want - len(better))  # of those level with the cut, the lowest ids
                found = np.concatenate([better, tied])
            conf = self.confidence[found]
            nxt: list[str] = []
            for neg, _, i in sorted(zip((-conf).tolist(), (self.ids[i] for i in found.tolist()), found.tolist()))[:want]:
                seen[i] = True
                out.append((self.ids[i], hop, -neg))
                for e in self.ends[i]:
                    if e not in visited:
                        visited.add(e)
                        nxt.append(e)
            frontier = nxt
        return out

    def around(self, entities: Sequence[str], t: float, per_entity: int,
               ) -> tuple[list[tuple[str, str, str, float]], dict[str, int]]:
        """Each entity's facts valid at t, most confident first (then id), at most `per_entity` each, as
        (fact id, entity, other end, confidence); and each entity's count of valid facts. One validity check for
        all the entities' facts: per entity, numpy's call overhead was most of the time (50 seeds: 13 ms)."""
        wanted = list(dict.fromkeys(entities))
        lists = [self.touching.get(e, _NONE) for e in wanted]
        every = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=sum(map(len, lists)))
        valid = self._valid(every, t).tolist() if len(every) else []
        confidence = self.confidence[every].tolist() if len(every) else []
        out: list[tuple[str, str, str, float]] = []
        degree: dict[str, int] = {}
        at = 0
        for e, positions in zip(wanted, lists, strict=True):
            held = [(-confidence[at + k], self.ids[i], i) for k, i in enumerate(positions) if valid[at + k]]
            at += len(positions)
            degree[e] = len(held)
            for neg, fid, i in sorted(held)[:per_entity]:
                s, o = self.ends[i]
                out.append((fid, e, o if s == e else s, -neg))
        return out, degree


class FactGraph(FactEdges):
    """Facts of one group by position; `version` and `epoch` say which of the store's changes it has seen.

    Times, confidence and retrieval counts are arrays; per fact only its id, its sentence and its
    endpoints are Python objects, and entity ids, relations and edge types are shared (interned per
    graph): ~1 KB a fact held as rows, ~610 bytes this way (tracemalloc, 10k facts).
    """

    def __init__(self, epoch: int, version: int) -> None:
        self.epoch = epoch
        self.version = version
        self.lock = threading.Lock()  # reader threads refresh and read a graph one at a time
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.size = 0
        self.valid_at = np.empty(0, dtype=np.float64)
        self.invalid_at = np.empty(0, dtype=np.float64)
        self.confidence = np.empty(0, dtype=np.float64)
        self.created_at = np.empty(0, dtype=np.float64)
        self.last_seen = np.empty(0, dtype=np.float64)  # nan: never re-observed
        self.retrievals = np.empty(0, dtype=np.int64)
        self.text: list[str] = []
        self.ends: list[tuple[str, str]] = []
        self.kind: list[tuple[str, str]] = []  # (relation, edge_type)
        self.touching: dict[str, list[int]] = {}  # entity id -> facts with it as subject or object
        self._shared: dict[object, object] = {}  # one object per distinct entity id, relation and kind

    @property
    def nbytes(self) -> int:
        return self.size * (6 * 8 + ROW_BYTES)

    def _one(self, value: object) -> object:
        return self._shared.setdefault(value, value)

    def put(self, rows: Sequence[FactRow]) -> None:
        """Add new facts, overwrite the changing fields of known ones (endpoints and kind never change)."""
        if not rows:
            return
        fresh = [r for r in rows if r[0] not in self.pos]
        if fresh:
            self._append(fresh)
        at = np.fromiter((self.pos[r[0]] for r in rows), dtype=np.int64, count=len(rows))
        self.valid_at[at] = [-math.inf if r[3] is None else r[3] for r in rows]
        self.invalid_at[at] = [math.inf if r[4] is None else r[4] for r in rows]
        self.confidence[at] = [r[2] for r in rows]
        self.created_at[at] = [r[5] for r in rows]
        self.last_seen[at] = [math.nan if r[6] is None else r[6] for r in rows]
        self.retrievals[at] = [r[7] for r in rows]
        for i, r in zip(at.tolist(), rows):
            self.text[i] = r[1]

    def _append(self, rows: Sequence[FactRow]) -> None:
        n, need = self.size, self.size + len(rows)
        for name in ("valid_at", "invalid_at", "confidence", "created_at", "last_seen"):
            setattr(self, name, grown(getattr(self, name), n, need, (), np.float64))
        self.retrievals = grown(self.retrievals, n, need, (), np.int64)
        one = self._one
        for i, r in enumerate(rows, start=n):
            self.ids.append(r[0])
            self.pos[r[0]] = i
            self.text.append(r[1])
            s, o = one(r[8]), one(r[9])
            self.ends.append((s, o))  # type: ignore[arg-type]
            self.kind.append(one((one(r[10]), one(r[11]))))  # type: ignore[arg-type]
            for e in {s, o}:
                self.touching.setdefault(e, []).append(i)  # type: ignore[arg-type]
        self.size = need

    def add_retrievals(self, counts: dict[str, int]) -> None:
        """Each held fact's retrieval count raised by its number in `counts` (ids not held are not this graph's)."""
        held = [(i, n) for fid, n in counts.items() if (i := self.pos.get(fid)) is not None]
        if held:
            at = np.fromiter((i for i, _ in held), dtype=np.int64, count=len(held))
            self.retrievals[at] += np.fromiter((n for _, n in held), dtype=np.int64, count=len(held))

    def valid(self, fact_ids: Sequence[str], t: float) -> set[str]:
        """Those of the ids that name a fact valid at t (an id not held is not)."""
        held = [fid for fid in fact_ids if fid in self.pos]
        keep = self._valid(np.fromiter((self.pos[fid] for fid in held), dtype=np.int64, count=len(held)), t)
        return {fid for fid, ok in zip(held, keep.tolist()) if ok}

    def standings(self, fact_ids: Sequence[str], pending: dict[str, int]) -> list[Standing]:
        """The held facts among the ids, in the order asked; `pending` adds retrievals not yet written."""
        held = [(fid, i) for fid in dict.fromkeys(fact_ids) if (i := self.pos.get(fid)) is not None]
        if not held:
            return []
        at = np.fromiter((i for _, i in held), dtype=np.int64, count=len(held))
        born = np.where(self.valid_at[at] == -math.inf, self.created_at[at], self.valid_at[at])
        seen = self.last_seen[at]
        observed = np.where(np.isnan(seen), born, seen)
        text, get = self.text, pending.get
        return [Standing(fid, text[i], c, o, n + get(fid, 0)) for (fid, i), c, o, n in zip(
            held, self.confidence[at].tolist(), observed.tolist(), self.retrievals[at].tolist())]


class FactGraphCache:
    """Graphs by group, least recently used dropped past a byte budget (the one in use is always kept)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._graphs: OrderedDict[str, FactGraph] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, group_id: str) -> FactGraph | None:
        with self._lock:
            graph = self._graphs.get(group_id)
            if graph is not None:
                self._graphs.move_to_end(group_id)
            return graph

    def put(self, group_id: str, graph: FactGraph) -> None:
        with self._lock:
            self._graphs[group_id] = graph
            self._graphs.move_to_end(group_id)
            total = sum(g.nbytes for g in self._graphs.values())
            while total > self.budget and len(self._graphs) > 1:
                _, old = self._graphs.popitem(last=False)
                total -= old.nbytes

    def drop(self, group_id: str) -> None:
        with self._lock:
            self._graphs.pop(group_id, None)

    def held(self) -> dict[str, FactGraph]:
        """The graphs held now, by group (a copy: the cache may change meanwhile)."""
        with self._lock:
            return dict(self._graphs)
