"""In-process mirror of each Neo4j group's searchable rows: embeddings, fact validity and fact edges.

Why: on Neo4j 5.26 (2 cores) one vector-index query cost 20-40 ms at 100k facts and an
exact in-database scan ~30 us a row, while the same search over a float32 matrix in
this process is one matrix product (an IVF index past `ANN_MIN_ROWS` rows, as the
SQLite store does). The graph walk of a recall is a dictionary lookup here instead of
a round trip. Neo4j stays the source of truth: every write transaction increments the
group's version (a `GroupVersion` node) and stamps the rows it writes with it, so a
mirror catches up by reading only rows stamped after its own version; a deletion
changes the group's `epoch`, which makes mirrors reload the group from scratch.

Held: ids and embeddings; every field of every fact, so `get_facts` of a recall's chosen
candidates needs no round trip either; every entity's name (facts show their endpoints'
current names); every episode's fields (episodes never change once written). Every write
that changes any of these stamps the row, or, for a rename, the entity (neo4j._FLUSH;
retrieval counts too, neo4j._COUNT_RETRIEVALS). Rows are read from Neo4j.

Used from the event loop's thread only, except index builds, which run on a worker
thread over a snapshot of a table's rows; each table's lock keeps the two apart
(see `_Table.maintain_index`).
"""

from __future__ import annotations

import bisect
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnemobus.store.fact_graph import FactEdges
from mnemobus.store.vectors import (
    RESCORE_FACTOR, IvfIndex, built_index, grown, single_threaded_blas, top_k, top_up_or_rebuild,
)

log = logging.getLogger(__name__)

ALWAYS = np.iinfo(np.int64).min  # valid_at None: valid since forever
NEVER = np.iinfo(np.int64).max  # invalid_at None: valid for ever
MAX_TIED = 1000  # rows level with the k-th best that are still ordered by id
NULL = ALWAYS  # a fact time that is None (created_at, expired_at, last_seen)
# Python objects per row beside the matrices, measured with tracemalloc (tests/store/test_neo4j_mirror_memory.py
# holds the count to what a mirror really allocates):
ROW_OVERHEAD_BYTES = 150  # an entity or episode row: id string, position dict slot, id list slot
FACT_ROW_BYTES = 700  # a fact row: that, its edge lists and list slots (columns, text and provenance counted as held)
NAME_ENTRY_BYTES = 80  # a dict slot of an entity's name or an episode's fields (the values are counted as read)
TALK_ENTRY_BYTES = 72  # an episode's (reference time, id) tuple and its slot in its channel's order
KINDS = ("fact", "entity", "episode")
Valid = Callable[[np.ndarray], np.ndarray]  # row positions -> which of them may be returned

# What a mirror reads from Neo4j, per kind: constant Cypher, parameters only. Times travel as epoch microseconds,
# as elsewhere in the store. Embeddings come as the float32 bytes written beside the float list (`emb32`, see
# neo4j._vec_bytes): one buffer to decode instead of 384 Bolt floats; rows written before that copy existed
# still come as the list.
_US = "{p}.epochSeconds * 1000000 + {p}.microsecond"
_V = "coalesce({p}.emb32, {p}.embedding) AS v"
_FACT_COLUMNS = (
    f"r.id AS id, r.ver AS ver, {_V.format(p='r')}, {_US.format(p='r.valid_at')} AS va, "
    f"{_US.format(p='r.invalid_at')} AS ia, r.confidence AS c, r.subject_id AS s, r.object_id AS o, r.relation AS rel, "
    f"r.edge_type AS et, r.fact AS f, {_US.format(p='r.created_at')} AS ca, {_US.format(p='r.expired_at')} AS xa, "
    f"{_US.format(p='r.last_seen')} AS ls, r.superseded_by AS sb, r.retrieval_count AS rc, r.episode_ids AS eps, "
    "r.source_message_ids AS sms, r.qualifier AS q"
)
_ENTITY_COLUMNS = f"n.id AS id, n.ver AS ver, {_V.format(p='n')}, n.name AS name"  # every entity: facts show names
_EPISODE_COLUMNS = (  # every episode: recall reads the rows of those its text or vector search found
    f"n.id AS id, n.ver AS ver, {_V.format(p='n')}, n.content AS content, n.role AS role, n.source_message_id AS sm, "
    f"{_US.format(p='n.reference_time')} AS rt, n.response AS resp, n.agent_id AS agent, n.platform AS platform, "
    f"n.channel_id AS channel, {_US.format(p='n.created_at')} AS ca, n.speaker AS speaker, n.name AS name"
)
LOAD_COLUMNS: dict[str, tuple[str, ...]] = {
    "fact": ("id", "ver", "v", "va", "ia", "c", "s", "o", "rel", "et", "f", "ca", "xa", "ls", "sb", "rc", "eps", "sms", "q"),
    "entity": ("id", "ver", "v", "name"),
    "episode": ("id", "ver", "v", "content", "role", "sm", "rt", "resp", "agent", "platform", "channel", "ca",
                "speaker", "name"),
}
# (pattern, variable, label, columns) per kind
_KINDS = {
    "fact": ("MATCH ()-[r:FACT]->()", "r", "r:FACT", _FACT_COLUMNS),
    "entity": ("MATCH (n:Entity)", "n", "n:Entity", _ENTITY_COLUMNS),
    "episode": ("MATCH (n:Episode)", "n", "n:Episode", _EPISODE_COLUMNS),
}
# PAGE: a load reads the group's stamped rows a page at a time, in (version, id) order after the cursor ($v, $id),
# each page collected into one record: the driver's cost per record made a 100k-fact group take ~20 s as a
# stream, ~7 s as pages. The (group_id, ver) index gives the order, so a page costs its own rows (PartialTop).
# The cursor's tie-break is one list comparison: written as "ver > $v OR id > $id" it turned the seek into a scan
# of the whole index from its start (every group before this one, and this one's pages before the cursor): PROFILE,
# page 3 of a 20k-row index: 10,511 index entries read, 511 with the list comparison.
# UNSTAMPED: rows written before versions existed (streamed; none in a store written since).
# DELTA: the rows stamped after `$since`, for a catch-up. The (group_id, ver) index is named in a hint: left to
# itself the planner picked the group_id index and read every row of the group to filter on ver.
PAGE: dict[str, str] = {
    kind: f"{match} USING INDEX SEEK {label}(group_id, ver) WHERE {x}.group_id = $g AND {x}.ver >= $v "
          f"AND [{x}.ver, {x}.id] > [$v, $id] WITH {x} ORDER BY {x}.group_id, {x}.ver, {x}.id LIMIT $k "
          f"WITH {cols} RETURN collect([{', '.join(LOAD_COLUMNS[kind])}]) AS rows"
    for kind, (match, x, label, cols) in _KINDS.items()
}
# how many rows of each kind a load will read, so the arrays are sized once (growing a 150 MB matrix a quarter
# at a time copied it ~20 times)
SIZES = " ".join(f"CALL {{ {match} WHERE {x}.group_id = $g RETURN count({x}) AS {kind} }}"
                 for kind, (match, x, _, _) in _KINDS.items()) + " RETURN " + ", ".join(_KINDS)
UNSTAMPED: dict[str, str] = {
    kind: f"{match} WHERE {x}.group_id = $g AND {x}.ver IS NULL RETURN {cols}"
    for kind, (match, x, label, cols) in _KINDS.items()
}
DELTA: dict[str, str] = {
    kind: f"{match} USING INDEX SEEK {label}(group_id, ver) WHERE {x}.group_id = $g AND {x}.ver > $since RETURN {cols}"
    for kind, (match, x, label, cols) in _KINDS.items()
}


def as_vector(v: Any) -> np.ndarray | Sequence[float] | None:
    """An embedding as read: float32 bytes (decoded without a copy) or, from rows older than the byte copy, a list."""
    if isinstance(v, (bytes, bytearray)):
        return np.frombuffer(v, dtype="<f4")
    return v


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

    def reserve(self, extra: int) -> None:
        """Room for `extra` more rows, so appending a batch grows the arrays once, not once a row."""
        need = self.size + extra
        if self.rows is None or need > self.rows.shape[0]:
            self.rows = grown(self.rows, self.size, need, (self.dim,), np.float32)
            self.has_vec = grown(self.has_vec, self.size, need, (), np.bool_)
        self._grow_columns(need)  # on their own: an empty table's first reserve(0) gave rows room but not them

    def _slot(self, row_id: str) -> int:
        """The row's position, appending a new (masked) row for an id not held yet."""
        i = self.pos.get(row_id)
        if i is not None:
            return i
        i = self.size
        self.reserve(1)
        self.rows[i] = 0.0  # type: ignore[index]
        self.has_vec[i] = False  # type: ignore[index]
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
            # not a daemon: exit waits for a build rather than tear numpy down under it (SIGSEGV, rc 139)
            threading.Thread(target=build, name="neo4j-mirror-index").start()
        else:
            build()


class _FactTable(_Table, FactEdges):  # FactEdges: the walk, shared with SQLite's graphs
    """Facts also keep every field a Fact carries, so walks, the validity filter and `get_facts` need no server.

    Times are int64 epoch microseconds (NULL for None; valid_at None is ALWAYS, invalid_at None NEVER, which
    the validity filter compares directly). Strings many rows share (entity ids, relations, episode ids) are
    interned, so 100k facts hold 25k entity id strings, not 200k.
    """

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.valid_at = np.empty(0, dtype=np.int64)
        self.invalid_at = np.empty(0, dtype=np.int64)
        self.confidence = np.empty(0, dtype=np.float64)
        self.created_at = np.empty(0, dtype=np.int64)
        self.expired_at = np.empty(0, dtype=np.int64)
        self.last_seen = np.empty(0, dtype=np.int64)
        self.retrievals = np.empty(0, dtype=np.int64)
        self.text: list[str] = []
        self.superseded_by: list[str | None] = []
        self.qualifier: list[str | None] = []  # set when the fact is written, never changed
        self.sources: list[tuple[tuple[str, ...], tuple[str, ...]]] = []  # (episode ids, message ids) as stored
        self.ends: list[tuple[str, str]] = []
        self.kind: list[tuple[str, str]] = []  # (relation, edge_type)
        self.touching: dict[str, list[int]] = {}  # entity id -> facts with it as subject or object
        self.held_bytes = 0  # the strings and tuples that differ row to row (fact text, provenance), as counted

    @property
    def nbytes(self) -> int:
        columns = sum(getattr(self, name).nbytes for name, _ in _FACT_COLUMNS_HELD)
        return super().nbytes + columns + self.size * (FACT_ROW_BYTES - ROW_OVERHEAD_BYTES) + self.held_bytes

    def _grow_columns(self, need: int) -> None:
        n = self.size
        for name, dtype in _FACT_COLUMNS_HELD:
            setattr(self, name, grown(getattr(self, name), n, need, (), dtype))

    def _row_bytes(self, i: int) -> int:
        eps, sms = self.sources[i]
        return (sys.getsizeof(self.text[i]) + sys.getsizeof(eps) + sys.getsizeof(sms)
                + sum(map(sys.getsizeof, eps)) + sum(map(sys.getsizeof, sms))
                + (sys.getsizeof(self.superseded_by[i]) if self.superseded_by[i] is not None else 0))

    def put_facts(self, rows: Sequence[dict[str, Any]]) -> None:
        """Add or update rows as the server returns them (LOAD_COLUMNS["fact"]); numeric columns a batch at a time."""
        self.reserve(len(rows))
        at = np.empty(len(rows), dtype=np.int64)
        for j, row in enumerate(rows):
            i = self.pos.get(row["id"])
            if i is None:  # endpoints, relation and type never change after a fact is written
                i = self._slot(row["id"])
                s, o = sys.intern(row["s"]), sys.intern(row["o"])
                self.ends.append((s, o))
                self.kind.append((sys.intern(row["rel"]), sys.intern(row["et"])))
                for e in {s, o}:
                    self.touching.setdefault(e, []).append(i)
                self.text.append(row["f"])
                self.superseded_by.append(row["sb"])
                self.qualifier.append(row.get("q"))
                self.sources.append(_sources(row))
            else:
                self.held_bytes -= self._row_bytes(i)
                self.text[i], self.superseded_by[i], self.sources[i] = row["f"], row["sb"], _sources(row)
            self.held_bytes += self._row_bytes(i)
            at[j] = i
            v = row["v"]
            if v is not None and not self.has_vec[i]:  # type: ignore[index]
                self.rows[i] = as_vector(v)  # type: ignore[index]
                self.has_vec[i] = True  # type: ignore[index]
        self.valid_at[at] = [ALWAYS if r["va"] is None else r["va"] for r in rows]
        self.invalid_at[at] = [NEVER if r["ia"] is None else r["ia"] for r in rows]
        self.confidence[at] = [r["c"] for r in rows]
        self.created_at[at] = [NULL if r["ca"] is None else r["ca"] for r in rows]
        self.expired_at[at] = [NULL if r["xa"] is None else r["xa"] for r in rows]
        self.last_seen[at] = [NULL if r["ls"] is None else r["ls"] for r in rows]
        self.retrievals[at] = [r["rc"] or 0 for r in rows]

    def set_retrievals(self, counts: Iterable[tuple[str, int]]) -> None:
        """Stored retrieval counts this process just wrote (see `Neo4jStore.flush_retrievals`)."""
        for fact_id, n in counts:
            i = self.pos.get(fact_id)
            if i is not None:
                self.retrievals[i] = n

    def record(self, i: int) -> dict[str, Any]:
        """Row i as the server's fact projection gives it (times as epoch microseconds, None where unset)."""
        (s, o), (rel, et), (eps, sms) = self.ends[i], self.kind[i], self.sources[i]
        va, ia = int(self.valid_at[i]), int(self.invalid_at[i])
        return {
            "id": self.ids[i], "subject_id": s, "object_id": o, "relation": rel, "edge_type": et,
            "fact": self.text[i], "confidence": float(self.confidence[i]),
            "valid_at": None if va == ALWAYS else va, "invalid_at": None if ia == NEVER else ia,
            "created_at": _time_or_none(self.created_at[i]), "expired_at": _time_or_none(self.expired_at[i]),
            "last_seen": _time_or_none(self.last_seen[i]), "superseded_by": self.superseded_by[i],
            "episode_ids": eps, "source_message_ids": sms, "retrieval_count": int(self.retrievals[i]),
            "qualifier": self.qualifier[i],
        }

    def valid_at_time(self, t: int) -> Valid:
        """A filter of positions: the contract's validity, valid_at <= t < invalid_at."""
        return lambda pos: self._valid(pos, t)


_FACT_COLUMNS_HELD = (
    ("valid_at", np.int64), ("invalid_at", np.int64), ("confidence", np.float64), ("created_at", np.int64),
    ("expired_at", np.int64), ("last_seen", np.int64), ("retrievals", np.int64),
)


EPISODE_FIELDS = ("content", "role", "source_message_id", "reference_time", "response", "agent_id", "platform",
                   "channel_id", "created_at", "speaker", "name")


def _sources(row: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(map(sys.intern, row["eps"] or ())), tuple(map(sys.intern, row["sms"] or ()))


def _time_or_none(us: np.int64) -> int | None:
    return None if us == NULL else int(us)


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
    names: dict[str, str] = field(init=False)  # entity id -> name, every entity (facts show their endpoints' names)
    episodes: dict[str, tuple[Any, ...]] = field(init=False)  # episode id -> its fields (EPISODE_FIELDS), every episode
    # channel -> its episodes' (reference time, id), sorted when `_unsorted` names the channel: what
    # `episode_context` walks (appended as rows arrive, sorted once before the next read, not per row)
    talk: dict[str | None, list[tuple[int, str]]] = field(init=False)
    names_bytes: int = 0
    episodes_bytes: int = 0

    def __post_init__(self) -> None:
        self.facts = _FactTable(self.dim)
        self.tables = {"fact": self.facts, "entity": _Table(self.dim), "episode": _Table(self.dim)}
        self.names = {}
        self.episodes = {}
        self.talk = {}
        self._unsorted: set[str | None] = set()

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tables.values()) + self.names_bytes + self.episodes_bytes

    def apply(self, kind: str, rows: Iterable[dict[str, Any]]) -> None:
        """Add or update rows; under the table's lock, so an index build never takes a row half written."""
        table = self.tables[kind]
        rows = list(rows)
        with table.lock:
            table.reserve(len(rows))
            if kind == "fact":
                self.facts.put_facts(rows)
            elif kind == "entity":
                for row in rows:
                    entity_id = sys.intern(row["id"])  # one string for the name, the row and facts' endpoints
                    self._name(entity_id, row["name"])
                    if row["v"] is not None:  # an entity without an embedding is only a name here
                        table.put(entity_id, as_vector(row["v"]))
            else:
                for row in rows:
                    episode_id = sys.intern(row["id"])
                    self.episode_from_row(episode_id, row)
                    if row["v"] is not None:
                        table.put(episode_id, as_vector(row["v"]))

    def episode_from_row(self, episode_id: str, row: dict[str, Any]) -> None:
        """Episodes never change once written (a deletion reloads the group): the first copy read is kept."""
        if episode_id in self.episodes:
            return
        held = (row["content"], sys.intern(row["role"]), row["sm"], row["rt"], row["resp"],
                *(None if row[k] is None else sys.intern(row[k]) for k in ("agent", "platform", "channel")), row["ca"],
                None if row.get("speaker") is None else sys.intern(row["speaker"]), row.get("name"))
        self.episodes[episode_id] = held
        channel = held[7]
        self.talk.setdefault(channel, []).append((held[3], episode_id))
        self._unsorted.add(channel)
        self.episodes_bytes += (NAME_ENTRY_BYTES + TALK_ENTRY_BYTES + sys.getsizeof(episode_id) + sys.getsizeof(held)
                                + sum(sys.getsizeof(x) for x in (*held[:5], held[10]) if x is not None))

    def _name(self, entity_id: str, name: str) -> None:
        old = self.names.get(entity_id)
        if old is None:
            self.names_bytes += NAME_ENTRY_BYTES + sys.getsizeof(entity_id)
        else:
            self.names_bytes -= sys.getsizeof(old)
        self.names[entity_id] = name
        self.names_bytes += sys.getsizeof(name)

    def fact_records(self, fact_ids: Sequence[str]) -> list[tuple[dict[str, Any], str, str]] | None:
        """(row, subject name, object name) of each fact, in the order asked; None when one is not held."""
        out = []
        for fact_id in fact_ids:
            i = self.facts.pos.get(fact_id)
            if i is None:
                return None
            s, o = self.facts.ends[i]
            sn, on = self.names.get(s), self.names.get(o)
            if sn is None or on is None:
                return None
            out.append((self.facts.record(i), sn, on))
        return out

    def episode_records(self, episode_ids: Sequence[str], light: bool = False) -> list[Any] | None:
        """Each episode as the server's projection gives it, in the order asked; None when one is not held.
        `light`: (id, held fields) instead (`_said`), what recall ranks by without a dict (issue 36)."""
        record = self._said if light else self._episode_record
        out = []
        for episode_id in episode_ids:
            held = self.episodes.get(episode_id)
            if held is None:
                return None
            out.append(record(episode_id))
        return out

    def _said(self, episode_id: str) -> tuple[str, tuple[Any, ...]]:
        return episode_id, self.episodes[episode_id]  # EPISODE_FIELDS' values, an immutable tuple

    def _episode_record(self, episode_id: str) -> dict[str, Any]:
        return {"id": episode_id, **dict(zip(EPISODE_FIELDS, self.episodes[episode_id], strict=True))}

    def episode_context(self, episode_ids: Sequence[str], span: int, within_s: float, light: bool = False,
                        ) -> list[tuple[str, int, Any]] | None:
        """(anchor, offset, record) of the turns around each episode, as the store's `episode_context` orders
        them; None when an anchor is not held (the server answers then). `light` as for `episode_records`."""
        record = self._said if light else self._episode_record
        for channel in self._unsorted:
            self.talk[channel].sort()
        self._unsorted.clear()
        within_us = within_s * 1_000_000
        out = []
        for anchor in episode_ids:
            held = self.episodes.get(anchor)
            if held is None:
                return None
            at, order = held[3], self.talk[held[7]]
            i = bisect.bisect_left(order, (at, anchor))
            for sign in (-1, 1):
                for step in range(1, span + 1):
                    j = i + sign * step
                    if not 0 <= j < len(order) or abs(order[j][0] - at) > within_us:
                        break
                    out.append((anchor, sign * step, record(order[j][1])))
        return out

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
        self._committing: dict[str, int] = {}  # group -> this process's writes of it whose commit is on its way

    def get(self, group_id: str) -> GroupMirror | None:
        mirror = self._mirrors.get(group_id)
        if mirror is not None:
            self._mirrors.move_to_end(group_id)
        return mirror

    def peek(self, group_id: str) -> GroupMirror | None:
        """The group's mirror, if held, leaving the eviction order alone (for writes, which are not uses)."""
        return self._mirrors.get(group_id)

    def put(self, group_id: str, mirror: GroupMirror) -> bool:
        """Keep the mirror, evicting the least recently used; False when it alone exceeds the budget."""
        self._mirrors[group_id] = mirror
        self._mirrors.move_to_end(group_id)
        return self.evict()

    def held_bytes(self) -> int:
        return sum(m.nbytes for m in self._mirrors.values())

    def evict(self) -> bool:
        """Drop least recently used mirrors until the budget holds; False when the newest had to go too."""
        total = self.held_bytes()
        newest = next(reversed(self._mirrors), None)
        while total > self.budget and self._mirrors:
            gid, mirror = self._mirrors.popitem(last=False)
            total -= mirror.nbytes
            if gid == newest:
                return False
        return True

    def drop(self, group_id: str) -> None:
        self._mirrors.pop(group_id, None)

    def committing(self, group_id: str) -> None:
        """A write of the group is committing: the server may show it before this process hears it did, so
        until `committed` no mirror of the group is trusted or confirmed (a read in that gap answered from
        a mirror confirmed during the write's transaction gave the value the write had just replaced)."""
        self._committing[group_id] = self._committing.get(group_id, 0) + 1
        self.stale(group_id, float("inf"))

    def committed(self, group_id: str, now: float) -> None:
        left = self._committing.get(group_id, 1) - 1
        if left > 0:
            self._committing[group_id] = left
        else:
            self._committing.pop(group_id, None)
        self.stale(group_id, now)

    def is_committing(self, group_id: str) -> bool:
        return group_id in self._committing

    def stale(self, group_id: str, now: float) -> None:
        """This process wrote the group: only a version read issued after `now` confirms the mirror again."""
        mirror = self._mirrors.get(group_id)
        if mirror is not None:
            mirror.checked_at = float("-inf")
            mirror.written_at = now

    def __contains__(self, group_id: str) -> bool:
        return group_id in self._mirrors
