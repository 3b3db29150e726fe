"""Community upkeep for one group: a full refresh (label propagation), and votes between refreshes.

Graphiti's community update ran in one unbounded pass on the event loop and hung or crashed on real graphs
(research/graphiti.md, #1397, #836). A refresh here reads active edges in chunks (pausing for ingestion
between them), propagates labels in a child process (`propagation_process`; or, with `propagation: thread`, a
worker thread, which holds the GIL against recall on the same loop), and stops when its time bound runs out,
keeping its state so the next refresh of the group resumes where it stopped; cancelling it kills the child (or
stops the thread at its next block of nodes). Only communities whose fingerprint changed are summarised and embedded: a refresh of an
unchanged graph does no summary work at all.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import anyio
import anyio.to_thread

from mnemobus.engine.community_summary import OfflineSummariser, Sketch, Summariser
from mnemobus.engine.embed import Embedder
from mnemobus.engine.embedders import portable_spec
from mnemobus.engine.label_propagation import Picked, Propagation, triples
from mnemobus.engine.propagation_process import ProcessPropagator
from mnemobus.shared.groups import GroupId
from mnemobus.shared.metrics import CommunityMetrics
from mnemobus.store.communities import Community, CommunityStore, Edge
from mnemobus.store.contract import GraphStore, neighbourhood
from mnemobus.store.model import Vector

log = logging.getLogger("mnemobus.engine.communities")
READ_BATCH = 500  # ids per read of names and fact sentences
EMBED_SLICE = 64  # texts per embedding call made in this process: each call holds the GIL for one slice only


@dataclass(frozen=True, slots=True)
class RefreshSettings:
    chunk_size: int = 5000  # active edges per read
    time_budget_s: float = 10.0  # one refresh slice; the next refresh resumes a sliced one
    max_iterations: int = 20
    summary_members: int = 5  # central members a summary names
    summary_facts: int = 5  # central facts a summary states
    summary_concurrency: int = 2  # summaries (LLM calls) in flight
    vote_neighbours: int = 50  # facts read to find a new entity's neighbours
    propagation: Literal["process", "thread"] = "process"  # where the pure-CPU steps run
    write_chunk: int = 200  # communities (dropped or written) per store transaction
    child_nice: int = 10  # the propagation child's niceness


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    group_id: GroupId
    finished: bool  # False: the time bound ran out; the next refresh of the group resumes
    edges: int = 0
    communities: int = 0
    changed: int = 0
    unchanged: int = 0
    dropped: int = 0
    summaries: int = 0  # summary work done (0 on an unchanged graph)
    seconds: float = 0.0


@dataclass
class _Run:
    """A refresh in progress: what has been read, and the propagation state."""

    key: str
    cursor: str | None = None
    read_done: bool = False
    edges: list[Edge] = field(default_factory=list)
    keys_cursor: str | None = None
    keys_done: bool = False
    keys: dict[str, str] = field(default_factory=dict)  # entity id -> node_key: propagation's node order
    propagation: Propagation | None = None  # in a thread; a child process keeps its own under `key`


async def _no_pause() -> None:
    return None


def _breathe() -> bool:
    """Between blocks of nodes: hand the GIL over, so the event loop (recall, ingestion) runs at once rather
    than at the interpreter's next forced switch (5 ms)."""
    time.sleep(0)
    return False


class CommunityRefresher:
    def __init__(self, store: GraphStore, embedder: Embedder | None, *, settings: RefreshSettings | None = None,
                 summariser: Summariser | None = None, metrics: CommunityMetrics | None = None,
                 pause: Callable[[], Awaitable[None]] = _no_pause) -> None:
        if not isinstance(store, CommunityStore):
            raise TypeError(f"the {store.name} store does not keep communities")
        self.store = store
        self.communities: CommunityStore = store
        self.embedder = embedder
        self.settings = settings or RefreshSettings()
        self.summariser = summariser or OfflineSummariser()
        self.metrics = metrics or CommunityMetrics()
        self.pause = pause  # awaited before each chunk: the worker's "ingestion is idle"
        self.threads_running = 0  # propagation threads alive (a cancelled one ends at its next block)
        self._runs: dict[GroupId, _Run] = {}
        self._locks: dict[GroupId, anyio.Lock] = {}  # one refresh of a group at a time (worker and API share one)
        self._threads_lock = threading.Lock()
        self._serial = itertools.count(1)
        self.propagator: ProcessPropagator | None = None  # started at the first refresh that needs it

    async def aclose(self) -> None:
        """Ends the propagation child, if one was started."""
        if self.propagator is not None:
            await self.propagator.aclose()

    def resumable(self, group_id: GroupId) -> bool:
        """A sliced refresh of the group is waiting to be resumed (not one running now: a batch stored while a
        refresh ran counted as a trigger and queued a second full refresh, back to back with the first)."""
        return group_id in self._runs and not self.refreshing(group_id)

    def refreshing(self, group_id: GroupId) -> bool:
        """A refresh of the group is running now (the worker's or one asked for over the API)."""
        lock = self._locks.get(group_id)
        return lock is not None and lock.locked()

    async def refresh(self, group_id: GroupId) -> RefreshOutcome:
        """One slice of the group's refresh; a second caller for the same group waits for the first, then runs
        its own slice (on an unchanged graph that is cheap: no summary work)."""
        lock = self._locks.setdefault(group_id, anyio.Lock())
        async with lock:
            return await self._one_slice(group_id)

    async def _one_slice(self, group_id: GroupId) -> RefreshOutcome:
        started = time.monotonic()
        deadline = started + self.settings.time_budget_s
        try:
            outcome = await self._refresh(group_id, deadline, started)
        except BaseException as exc:
            run = self._runs.pop(group_id, None)
            if run is not None and self.propagator is not None:
                self.propagator.forget(run.key)
            self.metrics.refreshes.labels(
                outcome="cancelled" if isinstance(exc, anyio.get_cancelled_exc_class()) else "failed").inc()
            raise
        self.metrics.refresh_seconds.observe(outcome.seconds)
        self.metrics.refreshes.labels(outcome="finished" if outcome.finished else "sliced").inc()
        if outcome.finished:
            self.metrics.last_refresh.set(time.time())
        return outcome

    async def _refresh(self, group_id: GroupId, deadline: float, started: float) -> RefreshOutcome:
        run = self._runs.get(group_id) or self._runs.setdefault(group_id, _Run(f"{group_id}#{next(self._serial)}"))
        while not run.keys_done:  # always at least one chunk per slice, so short slices still progress
            await self.pause()
            if not run.read_done:
                edges, run.cursor = await self.communities.active_edges(group_id, run.cursor, self.settings.chunk_size)
                run.edges.extend(edges)
                run.read_done = run.cursor is None
            else:
                keys, run.keys_cursor = await self.communities.node_keys(group_id, run.keys_cursor,
                                                                         self.settings.chunk_size)
                run.keys.update(keys)
                run.keys_done = run.keys_cursor is None
            if not run.keys_done and time.monotonic() > deadline:
                return RefreshOutcome(group_id, finished=False, edges=len(run.edges),
                                      seconds=time.monotonic() - started)
        if self.settings.propagation == "process":
            if self.propagator is None:
                self.propagator = ProcessPropagator(nice=self.settings.child_nice)
            picked = await self.propagator.run(run.key, group_id, run.edges, run.keys, max(0.0, deadline - time.monotonic()),
                                               self.settings.max_iterations, self.settings.summary_members,
                                               self.settings.summary_facts)
        else:
            picked = await self._in_thread(run, group_id, deadline)
        if picked is None:
            return RefreshOutcome(group_id, finished=False, edges=len(run.edges), seconds=time.monotonic() - started)
        del self._runs[group_id]
        return await self._store(group_id, picked, run, started)

    async def _in_thread(self, run: _Run, group_id: GroupId, deadline: float) -> list[Picked] | None:
        if run.propagation is None:
            run.propagation = await anyio.to_thread.run_sync(Propagation, triples(run.edges), run.keys)
        if not await self._propagate(run.propagation, deadline):
            return None
        return await anyio.to_thread.run_sync(run.propagation.picked, group_id, self.settings.summary_members,
                                              self.settings.summary_facts)

    async def _propagate(self, propagation: Propagation, deadline: float) -> bool:
        stop = threading.Event()

        def work() -> bool:
            with self._threads_lock:
                self.threads_running += 1
            try:
                return propagation.run(lambda: _breathe() or stop.is_set() or time.monotonic() > deadline,
                                       self.settings.max_iterations)
            finally:
                with self._threads_lock:
                    self.threads_running -= 1

        try:
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        finally:
            stop.set()  # a cancelled wait leaves the thread behind: it stops at its next block

    async def _store(self, group_id: GroupId, picked: list[Picked], run: _Run, started: float) -> RefreshOutcome:
        stored = await self.communities.communities(group_id)
        fingerprints = {k.id: k.fingerprint for k in stored}
        del stored  # every stored summary and vector: not kept while the changed ones are made
        changed = [p for p in picked if fingerprints.get(p.found.id) != p.found.fingerprint]
        drop = sorted(set(fingerprints) - {p.found.id for p in picked})
        self.metrics.summaries.labels(outcome="skipped").inc(len(picked) - len(changed))
        put = await self._summarised(group_id, changed)
        await self._write(group_id, put, drop)
        log.info("communities of %s refreshed: %d communities (%d changed, %d dropped) from %d edges in %.2fs",
                 group_id, len(picked), len(changed), len(drop), len(run.edges), time.monotonic() - started)
        return RefreshOutcome(group_id, finished=True, edges=len(run.edges), communities=len(picked),
                              changed=len(changed), unchanged=len(picked) - len(changed), dropped=len(drop),
                              summaries=len(put), seconds=time.monotonic() - started)

    async def _write(self, group_id: GroupId, put: list[Community], drop: list[str]) -> None:
        """In transactions of `write_chunk` communities, the loop's other tasks run between them: one transaction
        of 3,500 communities held the store's writer and this process's GIL for its whole length, in recall's
        tail. A refresh stopped between two leaves each community whole; the next refresh writes the rest (their
        fingerprints differ from the stored ones)."""
        n = self.settings.write_chunk
        now = datetime.now(UTC)
        for i in range(0, len(drop), n):
            await self.communities.write_communities(group_id, [], drop[i:i + n], now)
            await anyio.sleep(0)
        for i in range(0, len(put), n):
            await self.communities.write_communities(group_id, put[i:i + n], [], now)
            await anyio.sleep(0)
        if not put:  # the refresh time, also for a group with nothing to write
            await self.communities.write_communities(group_id, [], [], now)

    async def _summarised(self, group_id: GroupId, changed: list[Picked]) -> list[Community]:
        """Summary text and vector of each changed community: in the propagation child when it can make them
        (the offline text; an embedder it can load, `portable_spec`), else here, off the loop in slices."""
        if not changed:
            return []
        names, facts = await self._read_rows(group_id, changed)
        sketches = [Sketch(tuple(names[m] for m in p.central if m in names), tuple(facts[x] for x in p.facts if x in facts))
                    for p in changed]
        offline = isinstance(self.summariser, OfflineSummariser)
        spec = portable_spec(self.embedder)
        vectors: Sequence[Vector | None] | None = None
        if self.settings.propagation == "process" and (offline or spec is not None):
            items: Sequence[Sketch | str] = sketches if offline else await self._texts(sketches)
            if self.propagator is None:
                self.propagator = ProcessPropagator(nice=self.settings.child_nice)
            texts, made = await self.propagator.summaries(spec, items)
            if offline:
                self.metrics.summaries.labels(outcome="made").inc(len(texts))
            vectors = None if made is None else list(made)
        else:
            texts = await self._texts(sketches)
        if vectors is None:
            vectors = await self._embedded(texts)
        now = datetime.now(UTC)
        return [Community(p.found.id, group_id, p.found.members, p.found.fingerprint, text, vector, now)
                for p, text, vector in zip(changed, texts, vectors, strict=True)]

    async def _texts(self, sketches: list[Sketch]) -> list[str]:
        texts: list[str] = [""] * len(sketches)
        limiter = anyio.CapacityLimiter(self.settings.summary_concurrency)

        async def one(i: int) -> None:
            async with limiter:
                texts[i] = await self.summariser.summarise(sketches[i])
                self.metrics.summaries.labels(outcome="made").inc()

        async with anyio.create_task_group() as tg:
            for i in range(len(sketches)):
                tg.start_soon(one, i)
        return texts

    async def _embedded(self, texts: list[str]) -> list[Vector | None]:
        if self.embedder is None:
            return [None] * len(texts)
        vectors: list[Vector | None] = []
        for i in range(0, len(texts), EMBED_SLICE):
            vectors.extend(await anyio.to_thread.run_sync(self.embedder.embed, texts[i:i + EMBED_SLICE]))
        return vectors

    async def _read_rows(self, group_id: GroupId, picks: list[Picked]) -> tuple[dict[str, str], dict[str, str]]:
        """Names and fact sentences of every changed community in a few reads: one read per community made the
        first refresh of a 50k-fact group spend a third of its time on them."""
        entity_ids = sorted({m for p in picks for m in p.central})
        fact_ids = sorted({x for p in picks for x in p.facts})
        names: dict[str, str] = {}
        facts: dict[str, str] = {}
        for i in range(0, len(entity_ids), READ_BATCH):
            names.update((e.id, e.name) for e in await self.store.get_entities(group_id, entity_ids[i:i + READ_BATCH]))
        for i in range(0, len(fact_ids), READ_BATCH):
            facts.update((f.id, f.fact) for f in await self.store.get_facts(group_id, fact_ids[i:i + READ_BATCH]))
        return names, facts

    async def voting_groups(self, group_ids: Iterable[GroupId]) -> set[GroupId]:
        """Of these groups, those holding a community, read in one run (one thread hop on SQLite).

        Why: before its first refresh a group has no community for a new entity to join, yet its vote walked each
        new entity's neighbours to learn so: in bench-ingest's many small groups that was ~2.7 ms of the worker's
        CPU an episode, half its throughput."""
        groups = list(dict.fromkeys(group_ids))

        async def which(view: GraphStore, _: None) -> set[GroupId]:
            assert isinstance(view, CommunityStore)
            return {g for g in groups if await view.has_communities(g)}

        return await self.store.run_reads(which, lambda: None) if groups else set()

    async def vote(self, group_id: GroupId, entity_ids: Sequence[str]) -> dict[str, str]:
        """Entities with no community join the one most of their neighbours belong to (ties: smallest id). The
        worker asks only in groups that hold a community (`voting_groups`)."""
        have = await self.communities.community_of(group_id, entity_ids)
        joined: dict[str, str] = {}
        for entity_id in sorted(set(entity_ids) - set(have)):
            hops = await neighbourhood(self.store, group_id, [entity_id], as_of=datetime.now(UTC), max_hops=1,
                                       limit=self.settings.vote_neighbours)
            neighbours = {h.fact.object_id if h.fact.subject_id == entity_id else h.fact.subject_id for h in hops}
            votes = Counter((await self.communities.community_of(group_id, sorted(neighbours))).values())
            if not votes:
                self.metrics.votes.labels(outcome="none").inc()
                continue
            top = max(votes.values())
            winner = min(c for c, n in votes.items() if n == top)
            if await self.communities.join_community(group_id, winner, entity_id):
                joined[entity_id] = winner
                self.metrics.votes.labels(outcome="joined").inc()
        return joined
