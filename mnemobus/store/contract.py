"""The one contract every graph store backend implements.

The engine never asks which backend it holds, and every method takes a
GroupId: group scoping is part of the contract, not a special case.
Transient failures raise StoreUnavailable; the caller decides to retry.

Division of labour: a backend stores rows and answers candidate queries
(full-text, vector, neighbourhood, history). Every *decision* (which entity
an extracted name is, whether a fact reinforces or contradicts another, how
candidates are fused and weighted) lives in `mnemobus.engine`, so two
backends fed the same episodes give the same answers.

Time conventions: all datetimes are timezone-aware UTC. A fact is *valid at*
time t when `(valid_at is None or valid_at <= t) and (invalid_at is None or
t < invalid_at)`; every method taking `as_of` returns only facts valid at
that time (None means "now"). Vectors are unit-length float32 sequences;
similarity is the dot product (cosine).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio

from mnemobus.shared.groups import GroupId
from mnemobus.store.model import EdgeType, Entity, Episode, Fact, GroupExport, Neighbour, Said, Vector

T = TypeVar("T")
P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class DeleteCounts:
    episodes: int = 0
    entities: int = 0
    facts: int = 0

    @staticmethod
    def total(counts: Sequence[DeleteCounts]) -> DeleteCounts:
        return DeleteCounts(episodes=sum(c.episodes for c in counts), entities=sum(c.entities for c in counts),
                            facts=sum(c.facts for c in counts))


@dataclass(frozen=True, slots=True)
class Hit:
    """One candidate from one retrieval method: rank order is what fusion uses, score is kept for provenance."""

    id: str
    score: float


@dataclass(frozen=True, slots=True)
class FactHop:
    """A fact reached by walking the graph, and how many edges away from a seed entity it lies (1 = touches a seed)."""

    fact: Fact
    hop: int


@dataclass(frozen=True, slots=True)
class Step:
    """One fact reached by `walk`: its id, hops from a seed entity (1 = touches a seed), and its confidence."""

    fact_id: str
    hop: int
    confidence: float


@dataclass(frozen=True, slots=True)
class Standing:
    """What recall weighs and de-duplicates a candidate fact by.

    Recall weighs ~20 candidates per group and shows a handful; reading names and
    provenance for every candidate was a third of its time on the embedded store.
    Times are epoch seconds: building three datetimes per candidate and subtracting
    them was, after that, the largest part of weighing (cProfile, 10k-fact groups).
    """

    id: str
    fact: str
    confidence: float
    observed_s: float  # the last time the fact was observed: last_seen, else valid_at, else created_at
    retrieval_count: int

    @classmethod
    def of(cls, fact: Fact) -> Standing:
        """A whole fact's standing (a backend whose `fact_standings` gives whole facts, tests)."""
        born = (fact.valid_at or fact.created_at).timestamp()
        return cls(fact.id, fact.fact, fact.confidence, fact.last_seen.timestamp() if fact.last_seen else born,
                   fact.retrieval_count)


@dataclass(frozen=True, slots=True)
class Prefetch:
    """What the works of a batch will read first, so a backend with round trips can fetch it in one go.

    A hint, never a promise: works may read other things (each costs a read), and a backend without
    round trips ignores it. On Neo4j every read of a write transaction was a round trip, and most of an
    episode's cost.
    """

    episodes: tuple[tuple[GroupId, str], ...] = ()  # (group, episode id): is it stored?
    aliases: tuple[tuple[GroupId, str], ...] = ()  # (group, normalised name): which entity has it
    chains: tuple[tuple[GroupId, str, str], ...] = ()  # (group, subject's normalised name, relation): its facts
    # (group, normalised name, its vector): the `similar_k` entities nearest it, when no entity has the name
    similar: tuple[tuple[GroupId, str, Vector], ...] = ()
    similar_k: int = 3

    def groups(self) -> list[GroupId]:
        """Every group named, sorted."""
        return sorted({g for g, _ in self.episodes} | {g for g, _ in self.aliases} | {c[0] for c in self.chains}
                      | {s[0] for s in self.similar})


@dataclass(frozen=True, slots=True)
class EntityLinks:
    """What graph recall spreads over from some entities: the episodes that mention each (newest first) and the
    facts valid at a time that touch each (most confident first), each capped per entity, with each entity's
    full count of both, so a hub ("User", a speaker named in every turn) lends each neighbour only a share."""

    mentions: tuple[tuple[str, str], ...] = ()  # (entity id, episode id)
    facts: tuple[tuple[str, str, str, float], ...] = ()  # (fact id, entity id, the fact's other end, confidence)
    mention_degree: dict[str, int] = field(default_factory=dict)
    fact_degree: dict[str, int] = field(default_factory=dict)


class WriteTxn(Protocol):
    """One atomic write of one episode's consequences.

    Obtained from `GraphStore.transaction()`; everything written through it
    is committed together when the context exits normally and nothing is
    written when it exits with an exception. Reads through it see its own
    uncommitted writes. Only one transaction is open per store at a time.
    """

    async def insert_episode(self, episode: Episode, *, screened: bool, embedding: Vector | None) -> bool:
        """Store the episode; False (and nothing written) when its id is already stored in its group.

        An id stored in another group raises InvalidMessage("episode_id_conflict"): a different episode, not
        a replay, and never silently taken for one."""

    async def entity_by_alias(self, group_id: GroupId, alias: str, types: Sequence[str] | None = None) -> Entity | None:
        """The entity that has this normalised alias (its canonical name is always one) in the group.

        An alias belongs to at most one entity of each type (Jordan the place and Jordan the person share one);
        with `types`, only an entity of one of them is returned, the earliest in `types` first; without, the
        earliest seen (then the lowest id)."""

    async def similar_entities(self, group_id: GroupId, vector: Vector, k: int, *,
                               min_similarity: float | None = None) -> list[tuple[Entity, float]]:
        """Up to k entities of the group with an embedding, most similar first, with cosine similarity; with
        `min_similarity`, only those of the k at least that similar (the others' rows are never read)."""

    async def insert_entity(self, entity: Entity, embedding: Vector | None) -> None:
        """Store a new entity and register its canonical name and aliases as aliases."""

    async def observe_entity(self, group_id: GroupId, entity_id: str, *, name: str, alias: str, seen: datetime) -> None:
        """Re-observation: display name becomes `name`, alias added, last_seen raised, first_seen lowered."""

    async def link_episode_entity(self, group_id: GroupId, episode_id: str, entity_id: str) -> None: ...

    async def episodes_saying(self, group_id: GroupId, name: str, limit: int) -> list[tuple[str, str]]:
        """(id, content) of up to `limit` stored, unscreened episodes of the group whose content the full-text
        index matches the words of `name` in (a phrase; the index's stemming applies, so callers check the
        content): the candidates for the mention links of a name made known later (engine/mention_backfill.py)."""

    async def facts_between(self, group_id: GroupId, subject_id: str, relation: str, *,
                            objects: Sequence[str] | None = None, held_after: datetime | None = None) -> list[Fact]:
        """Every stored fact (valid or not) with this subject and relation, ordered by valid_at (None first).
        Narrowed (`objects` or `held_after` given, `in_narrowed_chain`): at least the facts whose object is one
        of `objects` or that still hold at or after `held_after`; a store may return more (in the same order)."""

    async def insert_fact(self, fact: Fact, embedding: Vector | None) -> None:
        """Store a new fact; its episode_ids/source_message_ids become its first provenance rows. Its qualifier
        (what the value holds for, or None) is stored with it and never changes (SQLite schema 8: a column; Neo4j:
        a property of the FACT relationship); every read of the fact gives it back."""

    async def update_fact(self, fact: Fact) -> None:
        """Overwrite the mutable fields: confidence, last_seen, valid_at, invalid_at, expired_at, superseded_by."""

    async def add_fact_source(self, group_id: GroupId, fact_id: str, episode_id: str, source_message_id: str) -> None:
        """Record one more episode that observed the fact (no-op when already recorded)."""


async def in_turn(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Independent reads one after another: for a backend whose reads do not wait on a network."""
    return [await call() for call in calls]


async def side_by_side(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Independent reads as sibling tasks: a networked backend overlaps (or coalesces) their round trips."""
    if len(calls) < 2:
        return await in_turn(calls)
    results: list[Any] = [None] * len(calls)

    async def run(i: int) -> None:
        results[i] = await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(run, i)
    return results


@runtime_checkable
class StoreReads(Protocol):
    """What recall and the graph tools read: candidate queries (ranked best first), fetches and counts. A
    new backend can pass the read half of the conformance suite with only this and `StoreWrites`."""

    async def run_reads(self, work: Callable[[GraphStore, P], Awaitable[T]], prepare: Callable[[], P]) -> T:
        """Run one recall's reads the way this backend answers them best: `prepare()` (CPU work: embedding the
        query) off the event loop, then `work(view, prepared)`, whose reads go through `view`. SQLite runs both
        on one snapshot, with reads that complete without suspending: on the event loop when its groups are
        loaded, else in one worker-thread hop; Neo4j hands `prepare` to a thread and runs `work` on its own
        reads. Writes and retrieval marks are not allowed inside, and `work` may be run twice (only reads)."""

    async def gather(self, calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """The results of independent reads, in the order given: side by side where round trips can overlap
        (a networked store; see `side_by_side`), in turn where they cannot (see `in_turn`)."""

    async def fact_standings(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Standing | Fact]:
        """What ranking needs of the named facts (missing ids skipped), in the order asked: a Standing where
        that is cheaper than the whole fact (SQLite: no joins), else the whole Fact, which recall then does
        not read again."""

    async def get_episode(self, group_id: GroupId, episode_id: str) -> Episode | None: ...

    async def episodes(self, group_id: GroupId, last_n: int = 10) -> list[Episode]:
        """The group's newest episodes by reference time, newest first."""

    async def count_episodes(self, group_id: GroupId | None = None) -> int:
        """Episodes in one group, or in the whole store when group_id is None."""

    async def count_screened(self, group_id: GroupId | None = None) -> int:
        """Episodes stored but kept out of extraction because of injection markers."""

    async def get_episodes(self, group_id: GroupId, episode_ids: Sequence[str], *,
                           light: bool = False) -> list[Episode | Said]:
        """The named episodes of the group (missing ids skipped), in the order asked. `light`: a Said where that
        is cheaper than the whole Episode (SQLite), else the whole Episode, which recall then does not read
        again; without it always whole Episodes."""

    async def episode_context(self, group_id: GroupId, episode_ids: Sequence[str], *, span: int,
                              within_s: float, light: bool = False) -> list[Neighbour]:
        """For each named episode, the episodes said just before and after it in its group and channel: up to
        `span` each side, each within `within_s` seconds of it, nearest first; order is reference time, then
        id at a tie. A turn's meaning often sits in the turns around it (a question and its answer). `light`
        as for `get_episodes`."""

    async def search_facts_text(
        self, group_id: GroupId, terms: Sequence[str], as_of: datetime, limit: int
    ) -> list[Hit]:
        """BM25 over fact sentences and their entity names; any term may match."""

    async def search_facts_vector(self, group_id: GroupId, vector: Vector, as_of: datetime, limit: int) -> list[Hit]:
        """Nearest fact embeddings among facts valid at as_of."""

    async def search_entities_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        """BM25 over entity display names, canonical names and aliases."""

    async def search_entities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]: ...

    async def search_episodes_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]: ...

    async def search_episodes_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]: ...

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
        """Breadth-first walk over facts valid at as_of, in both directions, nearest hops first.

        Within a hop, facts by confidence (highest first) then id. `relations`/
        `edge_types` restrict which edges may be followed; cycles are never
        walked twice; at most `limit` facts. Ids only: recall weighs far more
        candidates than it shows, so full rows are read for the chosen few
        (`neighbourhood` below reads them for every step).
        """

    async def entity_links(self, group_id: GroupId, entity_ids: Sequence[str], *, as_of: datetime,
                           per_entity: int) -> EntityLinks:
        """The mention graph and the fact graph around the entities, in one read (one round trip): see
        EntityLinks. Entities of other groups, and episodes said after as_of, are not linked."""

    # -- fetches ---------------------------------------------------------------

    async def get_facts(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Fact]:
        """The named facts of the group with names and provenance filled in, in the order asked."""

    async def get_entities(self, group_id: GroupId, entity_ids: Sequence[str]) -> list[Entity]: ...

    async def facts_valid_at(self, group_id: GroupId, as_of: datetime, limit: int = 1000) -> list[Fact]:
        """Every fact of the group valid at as_of (an as-of snapshot), oldest valid_at first."""

    async def edge_history(self, group_id: GroupId, subject_id: str, relation: str | None = None) -> list[Fact]:
        """All versions of the subject's facts (optionally of one relation), newest valid_at first."""

    async def episode_facts(self, group_id: GroupId, episode_ids: Sequence[str]) -> list[Fact]:
        """Every fact (held or ended) drawn from any of the episodes: what a message said, and whether it still
        holds, for a door that returns the message itself."""

    async def count_facts(self, group_id: GroupId | None = None) -> int: ...


@runtime_checkable
class StoreWrites(Protocol):
    """What ingestion writes: one atomic transaction per episode (see WriteTxn), and the retrieval counts
    recall keeps."""

    def transaction(self) -> AbstractAsyncContextManager[WriteTxn]:
        """Open the single write transaction; see WriteTxn."""

    async def mark_retrieved(self, group_id: GroupId, fact_ids: Sequence[str]) -> None:
        """Count one more retrieval of each fact (feeds the retrieval-count weight)."""

    async def reset_retrieval_counts(self, group_id: GroupId) -> None:
        """Forget how often the group's facts were recalled (counts, pending ones included, back to 0). Recall
        ranks often-recalled facts a little higher; an evaluation that asks many questions starts each measured
        pass from zero so one pass never tilts the next."""


@runtime_checkable
class ReportsDeadlocks(Protocol):
    """A store whose writers can deadlock each other (Neo4j): what it did about each lost one is not an error the
    caller sees, so the process's metrics listen (open_runtime)."""

    def observe_deadlocks(self, observer: Callable[[str], None]) -> None:
        """`observer(outcome)` once per write transaction that lost a deadlock: replayed or gave_up; and
        erased_meanwhile once per try that waited for a lock an erasure of its group took away."""


@runtime_checkable
class ReportsCacheCrowding(Protocol):
    """A store whose vector cache can be too small for one group: each recall of that group then reads a matrix
    from the file again (SQLite) or asks the server (Neo4j, the group not mirrored), which no answer shows, so the
    process's metrics listen (open_runtime)."""

    def observe_vector_cache_crowded(self, observer: Callable[[str], None]) -> None:
        """`observer(table)` whenever a group's own matrix of `table` was evicted to make room for its own (SQLite),
        or `observer("mirror")` when a group was left unmirrored for its size (Neo4j)."""


@runtime_checkable
class ReportsReadsOffLoop(Protocol):
    """A store that runs a recall's reads on the event loop when they cannot wait (SQLite, `on_loop.py`): a run that
    had to leave the loop costs a thread hop no answer shows, so the process's metrics listen (open_runtime)."""

    def observe_reads_off_loop(self, observer: Callable[[str], None]) -> None:
        """`observer(reason)` once per run that left the loop for a worker thread: cold (a group read for the
        first time), grown (many new rows to read first) or busy (a lock or the file held by another)."""


@dataclass(frozen=True, slots=True)
class Damage:
    """One damaged part of a store: `part` names it (a full-text index's table, or "file"); `repairable` when
    `ChecksIntegrity.repair` can mend it without losing anything."""

    part: str
    detail: str
    repairable: bool


@runtime_checkable
class ChecksIntegrity(Protocol):
    """A store that can look for damage in its own files and mend what is derived (SQLite's full-text indexes),
    for `mnemobus doctor`. Neo4j checks its store with its own tools (`neo4j-admin database check`)."""

    async def damage(self) -> list[Damage]:
        """Every damaged part, empty when the store is sound; it reads everything, so seconds on a large store."""

    async def repair(self, parts: Sequence[str]) -> None:
        """Rebuild each named repairable part from the rows it is derived from."""


@runtime_checkable
class StoreErasure(Protocol):
    """What deleting needs (the API's deletes and GDPR erasure): rows away, and no copy left behind."""

    async def delete_group(self, group_id: GroupId) -> DeleteCounts:
        """Remove every episode, entity, fact, link and embedding of the group."""

    async def delete_groups(self, group_ids: Sequence[GroupId]) -> DeleteCounts:
        """delete_group for each, all of them or none where the store has transactions that can hold them (a
        user's erasure must not stop half-way); a store that must delete in batches (Neo4j past one transaction's
        size) journals the erasure and finishes one cut short (store/neo4j/erasure.py)."""

    async def delete_fact(self, group_id: GroupId, fact_id: str) -> DeleteCounts:
        """Remove one fact and its provenance (zero counts when absent); the facts it had superseded become valid
        again, as after a delete_episode that took away their contradiction."""

    async def delete_episode(self, group_id: GroupId, episode_id: str) -> DeleteCounts:
        """Remove one episode, its links, and the facts and entities no other episode supports (zero counts when absent).

        Facts that a removed fact had superseded become valid again.
        """

    async def erase_residue(self) -> None:
        """After deletes that must erase (a GDPR request): leave no copy of deleted text in the store's files
        (index segments, write-ahead log), as far as the backend allows; docs/api.md says how far each goes."""


@runtime_checkable
class StoreAdmin(Protocol):
    """What running and moving a store needs: open, close, a liveness check, and every group as rows
    (`mnemobus migrate`, `doctor`, the heartbeat's store check)."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise StoreUnavailable when the store cannot answer a trivial query."""

    async def group_ids(self) -> list[GroupId]:
        """Every group the store holds (what `mnemobus migrate` copies by default)."""

    async def export_group(self, group_id: GroupId) -> GroupExport:
        """Every row of the group as stored, with embeddings and screening flags (mnemobus.kernel.migrate.Exportable)."""


@runtime_checkable
class GraphStore(StoreReads, StoreWrites, StoreErasure, StoreAdmin, Protocol):
    """The whole store a backend implements: the union of what each kind of caller needs."""

    name: str


@runtime_checkable
class BatchTransactions(Protocol):
    """Optional: a backend that can run many write works in one go, each atomic on its own.

    Ingestion of a batch uses it when offered (SQLite runs them all in one
    worker-thread hop, each in a savepoint, with one commit for the batch);
    otherwise it opens `transaction()` once per episode.
    """

    async def run_transactions(self, works: Sequence[Callable[[WriteTxn], Awaitable[T]]],
                               prefetch: Prefetch | None = None) -> list[T | Exception]:
        """Run each work atomically, in order; a work's exception is returned in its slot (and nothing of it is
        kept). Returns only once the successful works are durable; when the store fails, every slot says so.

        Works of one batch that write the same group see each other's writes, and no other writer changes
        the groups a work reads until the batch is durable: two workers never both extend one fact chain."""


@runtime_checkable
class Warming(Protocol):
    """Optional: a backend with in-process indexes that can load them before the first recall needs them.

    A 10k-fact group took ~150-250 ms to load on its first recall, past the plugin's deadline, so after
    every restart each active user's first request went on unenriched.
    """

    async def warm(self, max_groups: int, groups_prefix: str = "") -> list[GroupId]:
        """Load the indexes of up to `max_groups` groups, most recently written first, while they fit the
        memory budget; the groups loaded. Only groups whose id starts with `groups_prefix` ('': all), for a
        process that serves part of a shared store (`memory.warm_groups_prefix`)."""


def pick_by_type(found: Sequence[tuple[str, T]], types: Sequence[str] | None) -> T:
    """What an alias lookup answers from its (type, entity) rows, earliest seen first: the entity of the earliest
    type asked for, else the first."""
    if types is None:
        return found[0][1]
    return min(found, key=lambda tf: list(types).index(tf[0]))[1]


async def neighbourhood(store: StoreReads, group_id: GroupId, entity_ids: Sequence[str], **walk: Any) -> list[FactHop]:
    """`walk` (same keywords: as_of, max_hops, relations, edge_types, limit) with each fact read in full: for
    graph traversal, where every step is shown."""
    steps = await store.walk(group_id, entity_ids, **walk)
    facts = {f.id: f for f in await store.get_facts(group_id, [s.fact_id for s in steps])}
    return [FactHop(facts[s.fact_id], s.hop) for s in steps if s.fact_id in facts]


#: slack on `held_after`: a store compares its own encoding of the times (SQLite: float seconds), and a fact ended
#: at the very instant must not fall out of the chain by a rounding; more facts than needed change nothing
NARROWING_SLACK = timedelta(seconds=1)


def in_narrowed_chain(fact: Fact, objects: Sequence[str], held_after: datetime | None) -> bool:
    """Whether a narrowed `facts_between` keeps this fact: its object is named, or it has not ended before
    `held_after` (or begins after it).

    Why: ingestion reads a subject's chain for each fact it writes, and a subject's chain only grows (every
    "I use X" adds to the user's `uses`), so reading it whole made each episode cost more as the conversation grew
    (2.1 -> 3.8 ms CPU an episode at 32 -> 600 episodes a group). What a new fact does depends only on the facts of
    its own object (and the one it replaces) and, for a one-value relation, on those still held when it begins."""
    if fact.object_id in objects:
        return True
    if held_after is None:
        return False
    since = held_since(held_after)
    return (fact.invalid_at is None or fact.invalid_at >= since
            or (fact.valid_at is not None and fact.valid_at >= since))


def held_since(held_after: datetime) -> datetime:
    """`held_after` less the slack; a time at the calendar's start ("the first day of year 1") stays itself."""
    try:
        return held_after - NARROWING_SLACK
    except OverflowError:
        return held_after
