"""Ingestion of episodes: screen, extract, embed, resolve entities and facts; one transaction per episode.

The decisions (is this name an entity we know? does this fact repeat,
extend or contradict what we hold?) are made here, against the store's
WriteTxn, so every backend applies them identically.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import anyio
import anyio.to_thread
import numpy as np

from mnemobus.engine.candidates import CandidateAware, preselect
from mnemobus.engine.embed import Embedder
from mnemobus.engine.extract import (
    UNTYPED, BatchExtractor, ChunkedExtractor, ExtractedEnding, ExtractedFact, Extraction, Extractor,
)
from mnemobus.engine.mention_backfill import backfill_mentions, backfill_new_name
from mnemobus.engine.mentions import named_spans
from mnemobus.engine.previous_turn import PreviousTurnReader, previous_turns
from mnemobus.engine.turns_in_hand import TurnsInHand
from mnemobus.engine.relations import Meaning, canonical_extraction, one_value, per_qualifier, symmetric
from mnemobus.engine.text import display_name, has_injection_markers, normalise_name
from mnemobus.shared.errors import InvalidMessage
from mnemobus.shared.groups import GroupId, InvalidGroupId, validate_group_id
from mnemobus.shared.limits import MAX_CONTENT_CHARS
from mnemobus.store.contract import BatchTransactions, GraphStore, Prefetch, WriteTxn
from mnemobus.store.erasures import check_still_there, erasures_seen
from mnemobus.store.model import Entity, Episode, Fact, IngestOutcome

MAX_ID_CHARS = 512
SIMILAR_CANDIDATES = 3  # entities a new name is compared with
MERGE_SIMILARITY = 0.85
AMBIGUOUS_SIMILARITY = 0.70
EMBED_EPISODE_CHARS = 2000

# (new name, existing entity) -> merge? Called only for similarities in [0.70, 0.85).
Disambiguator = Callable[[str, Entity], bool]
# (extractor name, episodes, seconds): told after every extraction call, for the worker's metrics
ExtractionObserver = Callable[[str, int, float], None]


def word_subset_disambiguator(name: str, existing: Entity) -> bool:
    """Offline default: merge only when one name's words are all inside the other's ("Acme" / "Acme Corp")."""
    a = set(normalise_name(name).split())
    b = set(existing.canonical_name.split())
    return bool(a) and bool(b) and (a <= b or b <= a)


_NUMBER = re.compile(r"\d+")


def numbers_differ(a: str, b: str) -> bool:
    """"iPhone 14" / "iPhone 15", "Sprint 3" / "Sprint 4": embeddings put such names close (often above the merge
    line) though they name different things; the numbers in a name are its identity, so differing ones never merge."""
    na, nb = _NUMBER.findall(a), _NUMBER.findall(b)
    return bool(na or nb) and sorted(na) != sorted(nb)


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def entity_id_for(group_id: str, canonical_name: str, type_: str = UNTYPED) -> str:
    """Jordan the place and Jordan the person are two entities, so the type is part of a typed entity's id."""
    if type_ == UNTYPED:
        return _digest("entity", group_id, canonical_name)
    return _digest("entity", group_id, canonical_name, type_)


# kinds of things that are never one another: a name said of one never resolves to an entity of another
_DISTINCT_KINDS = ({"person", "agent"}, {"pet"}, {"place"}, {"organization"}, {"event"}, {"date"})


def types_compatible(a: str, b: str) -> bool:
    """May an entity of type `a` be the one a name of type `b` refers to? Two of the distinct kinds (people, pets,
    places, organisations, events, dates) never; anything else may, since extractors (and a parser's named-entity
    labels) often disagree on the looser kinds: "ProjectX" is a project in one sentence and an organisation in
    the next."""
    if a == b or UNTYPED in (a, b):
        return True
    kind_a = next((k for k in _DISTINCT_KINDS if a in k), None)
    kind_b = next((k for k in _DISTINCT_KINDS if b in k), None)
    return kind_a is None or kind_b is None or kind_a is kind_b


def fact_id_for(group_id: str, subject_id: str, relation: str, object_id: str, valid_at: datetime | None, episode_id: str) -> str:
    return _digest("fact", group_id, subject_id, relation, object_id, valid_at.isoformat() if valid_at else "", episode_id)


def valid_at_time(fact: Fact, t: datetime) -> bool:
    return (fact.valid_at is None or fact.valid_at <= t) and (fact.invalid_at is None or t < fact.invalid_at)


def end_time(fact: Fact, t: datetime) -> datetime:
    """When a fact ends that a statement at `t` ends: at `t`, but never before it began (a fact dated after the
    statement that ends it, told out of order, ends as soon as it began, so it never holds a negative span). The
    two comparisons once written here (`valid_at <= t` and `valid_at < t`) gave the same time, since at equality
    both are `t`; the max says what they meant."""
    return t if fact.valid_at is None else max(fact.valid_at, t)


#: a fact observed again is held with full confidence, however far decay had taken it (seed 002; issue 39)
FULL_CONFIDENCE = 1.0


def check_episode(episode: Episode) -> GroupId:
    """Reject what can never be stored, before anything is written."""
    try:
        group = validate_group_id(episode.group_id)
    except InvalidGroupId as exc:
        raise InvalidMessage("invalid_group_id", str(exc)) from exc
    if not episode.id or len(episode.id) > MAX_ID_CHARS:
        raise InvalidMessage("invalid_episode_id", "episode id must be 1..512 characters")
    if not episode.content or not episode.content.strip():
        raise InvalidMessage("empty_content", "episode content is empty")
    for name, text in (("content", episode.content), ("response", episode.response or ""),
                       ("source_message_id", episode.source_message_id), ("role", episode.role)):
        if len(text) > MAX_CONTENT_CHARS:
            raise InvalidMessage("content_too_large", f"{name} is {len(text)} characters; the limit is {MAX_CONTENT_CHARS}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidMessage("invalid_unicode", f"{name} holds a lone surrogate at position {exc.start}") from exc
    if not isinstance(episode.reference_time, datetime):
        raise InvalidMessage("invalid_reference_time", "reference_time must be a datetime")
    return group


@dataclass
class _Counts:
    entities: int = 0
    added: int = 0
    reinforced: int = 0
    invalidated: int = 0


@dataclass
class _Prepared:
    """One episode between screening and commit: what the transaction will write."""

    slot: int
    episode: Episode
    screened: bool
    extraction: Extraction
    vectors: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    #: the names the turn says (engine/mentions.py), found once: the prefetch, the batch's index of who says what
    #: and the turn's own mention links all read them
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.names = tuple(named_spans(self.episode.content))


Work = Callable[[WriteTxn], Awaitable[IngestOutcome]]
#: an episode between extraction and storing: its slot, itself, screened?, its extraction or the exception it raised
_Read = tuple[int, Episode, bool, "Extraction | Exception"]


async def commit_each(store: GraphStore, works: Sequence[Work],
                      prefetch: Prefetch | None = None) -> list[IngestOutcome | Exception]:
    """Every work in its own transaction; one work's failure is returned in its slot and never touches the others."""
    if isinstance(store, BatchTransactions):
        return await store.run_transactions(works, prefetch)
    out: list[IngestOutcome | Exception] = []
    for work in works:
        try:
            async with store.transaction() as txn:
                out.append(await work(txn))
        except Exception as exc:  # noqa: BLE001 - reported in the slot
            out.append(exc)
    return out


def prefetch_for(prepared: Sequence[_Prepared]) -> Prefetch:
    """What the batch's works will read first: their episode ids, the names they mention (and the entities nearest
    each, for a name no entity has yet) and the fact chains of their facts' and endings' subjects (by name), so a
    store with round trips fetches them in one go (see Prefetch)."""
    episodes, aliases, chains = [], set(), set()
    similar: dict[tuple[GroupId, str], np.ndarray] = {}
    for p in prepared:
        group = p.episode.group_id
        episodes.append((group, p.episode.id))
        if p.screened:
            continue
        for e in p.extraction.entities:
            name = normalise_name(e.name)
            aliases.add((group, name))
            vector = p.vectors.get(("entity", e.name))
            if name and vector is not None:
                similar.setdefault((group, name), vector)
        aliases.update((group, name) for name in p.names)
        chains.update((group, normalise_name(f.subject), f.relation) for f in p.extraction.facts)
        for e in p.extraction.endings:
            chains.update((group, normalise_name(e.subject), r) for r in (e.relation, *e.relations))
            if e.object and symmetric(e.relation):
                chains.add((group, normalise_name(e.object), e.relation))
    return Prefetch(tuple(episodes), tuple(sorted(a for a in aliases if a[1])), tuple(sorted(c for c in chains if c[1])),
                    tuple((g, name, v) for (g, name), v in similar.items()), SIMILAR_CANDIDATES)


#: who in a batch says each name: (group, normalised name) -> (position in the batch, episode), in batch order
SaidBy = dict[tuple[GroupId, str], list[tuple[int, Episode]]]


def said_by(prepared: Sequence[_Prepared]) -> SaidBy:
    """The names each turn of the batch says (engine/mentions.py), indexed by name; screened turns say none."""
    out: SaidBy = {}
    for i, p in enumerate(prepared):
        if not p.screened:
            for name in p.names:
                out.setdefault((p.episode.group_id, name), []).append((i, p.episode))
    return out


async def _link_earlier(txn: WriteTxn, position: int, episode: Episode, extraction: Extraction,
                        said: SaidBy) -> None:
    """Link the turns said before this one in the same batch to the entities this one's extraction names, when
    they say one of its names: those turns looked their names up before this turn's entities existed ("Biscuit
    chewed up my sneakers" ahead of "Sofia adopted a puppy called Biscuit" in one batch). A turn whose own write
    failed is not linked (the stores link an episode of the group only)."""
    group = episode.group_id
    names = sorted({normalise_name(name) for e in extraction.entities for name in (e.name, *e.aliases)} - {""})
    for name in names:
        before = [ep for i, ep in said.get((group, name), ()) if i < position]
        if before and (known := await txn.entity_by_alias(group, name)) is not None:
            for ep in before:
                await txn.link_episode_entity(group, ep.id, known.id)


class Ingestor:
    def __init__(self, store: GraphStore, extractor: Extractor, embedder: Embedder | None,
                 disambiguator: Disambiguator = word_subset_disambiguator, meaning: Meaning | None = None) -> None:
        self.store = store
        self.extractor = extractor
        self.embedder = embedder
        self.disambiguator = disambiguator
        self.meaning = meaning  # the semantic fallback for relations the table does not name (relation_meaning.py)
        self.in_hand = TurnsInHand()  # batches in flight: extracted in order, each after the turns before it
        self.observers: list[ExtractionObserver] = []
        self.batches_in_flight = 0  # ingest_many calls not yet returned
        self.overlapping = False  # the caller overlaps its batches by design (MemoryEngine.overlapping_batches)

    async def _canonical(self, extractions: list[Extraction]) -> list[Extraction]:
        """Relations mapped to the table's; with the semantic fallback in a thread: its model loads on the first
        batch a process ingests (a process that only recalls, the plugin, never pays its ~0.9 s and ~280 MB) and
        each new name is embedded off the event loop."""
        if self.meaning is None or not extractions:
            return [canonical_extraction(x, None) for x in extractions]
        meaning = self.meaning
        return await anyio.to_thread.run_sync(lambda: [canonical_extraction(x, meaning) for x in extractions])

    async def ingest(self, episode: Episode) -> IngestOutcome:
        result = (await self.ingest_many([episode]))[0]
        if isinstance(result, BaseException):
            raise result
        return result

    async def ingest_many(self, episodes: Sequence[Episode]) -> list[IngestOutcome | BaseException]:
        """Extract every episode, embed all their texts in one model call, then commit each in its own transaction.

        Batching is where the throughput comes from: the model runs once for
        the whole batch (and the store commits the batch in one thread hop),
        while each episode stays atomic and idempotent on its own. Any
        exception for one episode is returned in its slot.
        """
        ticket = self.in_hand.ticket()  # before anything is awaited: the order batches came in
        self.batches_in_flight += 1
        try:
            return await self._ingest_many(episodes, ticket)
        finally:
            self.batches_in_flight -= 1
            self.in_hand.done(ticket)

    async def _ingest_many(self, episodes: Sequence[Episode], ticket: int) -> list[IngestOutcome | BaseException]:
        results: list[IngestOutcome | BaseException | None] = [None] * len(episodes)
        checked: list[tuple[int, Episode]] = []
        for slot, raw in enumerate(episodes):
            try:
                group = check_episode(raw)
            except InvalidMessage as exc:
                results[slot] = exc
                continue
            when = raw.reference_time if raw.reference_time.tzinfo else raw.reference_time.replace(tzinfo=UTC)
            checked.append((slot, replace(raw, group_id=group, reference_time=when,
                                          created_at=raw.created_at or datetime.now(UTC))))
        # the writes start now: an erasure of their group that commits from here on erases them too
        try:
            seen = await erasures_seen(self.store, [episode.group_id for _, episode in checked])
        except Exception as exc:  # noqa: BLE001 - StoreUnavailable: each episode reports it, as a failed write would
            for slot, _ in checked:
                results[slot] = exc
            checked, seen = [], None
        stored = await self._already_stored(checked, results)
        fresh: list[tuple[int, Episode, bool]] = []
        for slot, episode in checked:
            if results[slot] is not None:
                continue
            if episode.id in stored.get(episode.group_id, ()):
                results[slot] = IngestOutcome(episode.id, created=False)
                continue
            fresh.append((slot, episode, has_injection_markers(episode.content)))
        if isinstance(self.extractor, ChunkedExtractor):
            chunks = self.extractor.chunks([ep for _, ep, screened in fresh if not screened],
                                           overlapped=self.overlapping or self.batches_in_flight > 1)
            if len(chunks) > 1:
                await self._pipelined(self.extractor, fresh, chunks, seen, results, ticket)
                return [r if r is not None else RuntimeError("episode was not processed") for r in results]
        extractions = await self._extract([ep for _, ep, screened in fresh if not screened], ticket)
        read: list[_Read] = []
        for slot, episode, screened in fresh:
            extraction = Extraction() if screened else extractions.pop(0)
            read.append((slot, episode, screened, extraction))
        await self._store(read, seen, results)
        return [r if r is not None else RuntimeError("episode was not processed") for r in results]

    async def _store(self, read: Sequence[_Read], seen: dict[GroupId, int] | None,
                     results: list[IngestOutcome | BaseException | None]) -> None:
        """Extracted episodes -> relations mapped, one embedding call, each in its own transaction, one commit."""
        kept: list[_Read] = []
        for slot, episode, screened, extraction in read:
            if isinstance(extraction, Exception):  # one bad episode must not sink the batch
                results[slot] = extraction
                continue
            kept.append((slot, episode, screened, extraction))
        canon = await self._canonical([r[3] for r in kept])  # type: ignore[misc]
        prepared = [_Prepared(slot, episode, screened, c) for (slot, episode, screened, _), c in zip(kept, canon, strict=True)]
        try:
            await self._embed(prepared)
        except Exception as exc:  # noqa: BLE001 - without vectors none of them can be written as designed
            for p in prepared:
                results[p.slot] = exc
            prepared = []
        said = said_by(prepared)  # each work also links the turns before it that say a name it makes known
        works = [self._work(p, seen, i, said) for i, p in enumerate(prepared)]
        outcomes = await commit_each(self.store, works, prefetch_for(prepared))
        for p, outcome in zip(prepared, outcomes, strict=True):
            results[p.slot] = outcome

    async def _pipelined(self, extractor: ChunkedExtractor, fresh: list[tuple[int, Episode, bool]],
                         chunks: list[list[int]], seen: dict[GroupId, int] | None,
                         results: list[IngestOutcome | BaseException | None], ticket: int) -> None:
        """The batch stored chunk by chunk (whole groups each, so each is read and resolved exactly as in the
        whole batch) while the extractor extracts the next one elsewhere; screened turns go with the first chunk.
        A chunk is stored whole or not at all: one the extractor lost fails in every slot, as do the ones after."""
        started = time.perf_counter()
        storing = 0.0
        said = [(slot, ep) for slot, ep, screened in fresh if not screened]
        screened = [(slot, ep, True, Extraction()) for slot, ep, s in fresh if s]
        episodes = [ep for _, ep in said]

        async def ready(positions: list[int], extractions: list[Extraction | Exception]) -> None:
            nonlocal screened, storing
            t = time.perf_counter()
            read: list[_Read] = [*screened, *((said[i][0], said[i][1], False, x if isinstance(x, Exception)
                                                or x.extractor else replace(x, extractor=extractor.name))
                                               for i, x in zip(positions, extractions, strict=True))]
            screened = []
            self.in_hand.keep([said[i][1] for i, x in zip(positions, extractions, strict=True)
                               if not isinstance(x, Exception)])
            await self._store(read, seen, results)
            storing += time.perf_counter() - t

        try:
            previous = (await self._turns_before(episodes, ticket) if isinstance(extractor, PreviousTurnReader)
                        else [[] for _ in episodes])
            await extractor.extract_chunks(episodes, previous, chunks, ready)
        except Exception as exc:  # noqa: BLE001 - every episode not stored yet reports it; the worker redelivers them
            for slot, _, _ in fresh:
                if results[slot] is None:
                    results[slot] = exc
        finally:
            self.in_hand.done(ticket)
        for observe in self.observers:
            observe(extractor.name, len(episodes), time.perf_counter() - started - storing)

    async def _turns_before(self, episodes: Sequence[Episode], ticket: int) -> list[list[Episode]]:
        """The turns a look-back extractor reads before the batch's (previous_turn.py), once every batch that came
        before this one is extracted and in hand, stored or not (turns_in_hand.py)."""
        await self.in_hand.turn_of(ticket)
        return await previous_turns(self.store, episodes, self.in_hand.of_group)

    async def _extract(self, episodes: list[Episode], ticket: int) -> list[Extraction | Exception]:
        """Each episode's extraction or the exception it alone raised; a batch extractor gets them all at once,
        any other extractor every episode at once too (a model endpoint's concurrency cap decides how many run)."""
        if not episodes:
            return []
        started = time.perf_counter()
        out: list[Extraction | Exception] = []
        if isinstance(self.extractor, PreviousTurnReader):  # "she" after a turn that named her (previous_turn.py)
            try:
                previous = await self._turns_before(episodes, ticket)
                out = list(await self.extractor.extract_after(episodes, previous))
            except Exception as exc:  # noqa: BLE001 - reported in every slot; the worker retries or dead-letters
                out = [exc] * len(episodes)
            self.in_hand.keep([ep for ep, x in zip(episodes, out, strict=True) if not isinstance(x, Exception)])
            self.in_hand.done(ticket)
        elif isinstance(self.extractor, BatchExtractor):
            try:
                out = list(await self.extractor.extract_many(episodes))
            except Exception as exc:  # noqa: BLE001 - reported in every slot; the worker retries or dead-letters
                out = [exc] * len(episodes)
        else:
            out = [Exception("not extracted")] * len(episodes)

            async def one(i: int, episode: Episode) -> None:
                try:
                    out[i] = await self._extract_one(episode)
                except Exception as exc:  # noqa: BLE001 - reported in the slot
                    out[i] = exc

            async with anyio.create_task_group() as tg:
                for i, episode in enumerate(episodes):
                    tg.start_soon(one, i, episode)
        elapsed = time.perf_counter() - started
        for observe in self.observers:
            observe(self.extractor.name, len(episodes), elapsed)
        return [x if isinstance(x, Exception) or x.extractor else replace(x, extractor=self.extractor.name)
                for x in out]

    async def _extract_one(self, episode: Episode) -> Extraction:
        """The hook for candidate-aware extractors: what the store holds near this episode goes in with it."""
        ex = self.extractor
        if isinstance(ex, CandidateAware):
            candidates = await preselect(self.store, episode, ex.speaker_names(episode),
                                         max_entities=ex.max_candidate_entities, max_facts=ex.max_candidate_facts)
            return await ex.extract_with(episode, candidates)
        return await ex.extract(episode)

    async def _already_stored(self, checked: list[tuple[int, Episode]],
                              results: list[IngestOutcome | BaseException | None]) -> dict[str, set[str]]:
        """Ids already stored, per group: a redelivery skips extraction and embedding altogether."""
        by_group: dict[GroupId, list[tuple[int, Episode]]] = {}
        for slot, episode in checked:
            by_group.setdefault(episode.group_id, []).append((slot, episode))
        if not by_group:
            return {}

        async def look(view: GraphStore, group: GroupId, ids: list[str]) -> set[str] | Exception:
            try:
                return {e.id for e in await view.get_episodes(group, ids)}
            except Exception as exc:  # noqa: BLE001 - StoreUnavailable for this group's episodes only
                return exc

        async def every_group(view: GraphStore, _: None) -> list[set[str] | Exception]:
            # one run, not a read per group: on SQLite one thread hop for all of them (a batch of 32 holds up to
            # 32 groups: a hop each was a tenth of the batch door's time on the event loop); on a networked
            # store the groups' round trips side by side
            return await view.gather([lambda g=g, items=items: look(view, g, [e.id for _, e in items])
                                      for g, items in by_group.items()])

        try:
            found = await self.store.run_reads(every_group, lambda: None)
        except Exception as exc:  # noqa: BLE001 - StoreUnavailable: each episode reports it
            found = [exc] * len(by_group)
        stored: dict[str, set[str]] = {}
        for (group, items), ids in zip(by_group.items(), found, strict=True):
            if isinstance(ids, Exception):
                for slot, _ in items:
                    results[slot] = ids
            else:
                stored[group] = ids
        return stored

    def _work(self, p: _Prepared, seen: dict[GroupId, int] | None, position: int, said: SaidBy) -> Work:
        async def work(txn: WriteTxn) -> IngestOutcome:
            episode = p.episode
            await check_still_there(txn, episode.group_id, seen)
            if not await txn.insert_episode(episode, screened=p.screened, embedding=p.vectors.get(("episode", ""))):
                return IngestOutcome(episode.id, created=False)
            counts = _Counts()
            if not p.screened:
                await self._apply(txn, episode, p.extraction, p.vectors, counts, p.names)
                await _link_earlier(txn, position, episode, p.extraction, said)
            return IngestOutcome(episode.id, created=True, screened=p.screened, entities=counts.entities,
                                 facts_added=counts.added, facts_reinforced=counts.reinforced,
                                 facts_invalidated=counts.invalidated, facts_extracted=p.extraction.statements,
                                 extractor=p.extraction.extractor)

        return work

    async def _embed(self, prepared: list[_Prepared]) -> None:
        """One model call for the whole batch: every message, entity name and fact sentence, each text once."""
        if self.embedder is None or not prepared:
            return
        wanted: list[tuple[_Prepared, tuple[str, str], str]] = []
        for p in prepared:
            if p.screened:  # never searchable, so never embedded
                continue
            wanted.append((p, ("episode", ""), p.episode.content[:EMBED_EPISODE_CHARS]))
            for e in p.extraction.entities:
                wanted.append((p, ("entity", e.name), display_name(e.name)))
            for f in p.extraction.facts:
                wanted.append((p, ("fact", f.fact), f.fact))
            for e in p.extraction.endings:
                if e.fact:
                    wanted.append((p, ("fact", e.fact), e.fact))
        texts = list(dict.fromkeys(text for _, _, text in wanted))
        if not texts:
            return
        rows = await anyio.to_thread.run_sync(self.embedder.embed, texts)
        index = {text: i for i, text in enumerate(texts)}
        for p, key, text in wanted:
            p.vectors[key] = rows[index[text]]

    async def _entity(self, txn: WriteTxn, episode: Episode, name: str, type_: str,
                      vector: np.ndarray | None, counts: _Counts, keep_apart: set[str]) -> Entity | None:
        shown = display_name(name)
        canonical = normalise_name(name)
        if not canonical:
            return None
        group = episode.group_id
        found = None if type_ == UNTYPED else await txn.entity_by_alias(group, canonical, (type_, UNTYPED))
        if found is None:
            found = await txn.entity_by_alias(group, canonical)
            if found is not None and not types_compatible(found.type, type_):
                found = None  # Jordan the country is not Jordan the friend
        if found is None and vector is not None:
            # nearest first, so a candidate less similar than AMBIGUOUS_SIMILARITY can never be taken: not read
            for candidate, similarity in await txn.similar_entities(group, vector, SIMILAR_CANDIDATES,
                                                                    min_similarity=AMBIGUOUS_SIMILARITY):
                if (candidate.canonical_name in keep_apart or numbers_differ(canonical, candidate.canonical_name)
                        or not types_compatible(candidate.type, type_)):
                    continue  # names said together in one episode are different things (vim -> neovim)
                if similarity >= MERGE_SIMILARITY or (
                    similarity >= AMBIGUOUS_SIMILARITY and self.disambiguator(shown, candidate)
                ):
                    found = candidate
                break
        if found is not None:
            await txn.observe_entity(group, found.id, name=shown if canonical == found.canonical_name else found.name,
                                     alias=canonical, seen=episode.reference_time)
            await txn.link_episode_entity(group, episode.id, found.id)
            await backfill_new_name(txn, group, canonical, found)
            return found
        entity = Entity(id=entity_id_for(group, canonical, type_), group_id=group, name=shown,
                        canonical_name=canonical, type=type_, first_seen=episode.reference_time,
                        last_seen=episode.reference_time)
        await txn.insert_entity(entity, vector)
        await txn.link_episode_entity(group, episode.id, entity.id)
        await backfill_mentions(txn, group, canonical, entity.id)  # the turns that said it before it was known
        counts.entities += 1
        return entity

    async def _apply(self, txn: WriteTxn, episode: Episode, extraction: Extraction,
                     vectors: dict[tuple[str, str], np.ndarray], counts: _Counts, names: Sequence[str]) -> None:
        said = {normalise_name(e.name) for e in extraction.entities}
        entities: dict[str, Entity] = {}
        for e in extraction.entities:
            resolved = await self._entity(txn, episode, e.name, e.type, vectors.get(("entity", e.name)), counts,
                                          said - {normalise_name(e.name)})
            if resolved is None:
                continue
            entities[e.name] = resolved
            for alias in e.aliases:  # "my name is Jo", the user's name from users.yaml: the same person
                if key := normalise_name(alias):
                    await txn.observe_entity(episode.group_id, resolved.id, name=resolved.name,
                                             alias=key, seen=episode.reference_time)
                    await backfill_new_name(txn, episode.group_id, key, resolved)
        for name in names:  # names it says of entities already known (engine/mentions.py)
            if name not in said and (known := await txn.entity_by_alias(episode.group_id, name)) is not None:
                await txn.link_episode_entity(episode.group_id, episode.id, known.id)
        for f in extraction.facts:
            subject, obj = entities.get(f.subject), entities.get(f.object)
            if subject is None or obj is None or subject.id == obj.id:
                continue
            old = entities.get(f.replaces) if f.replaces else None
            await self._fact(txn, episode, f, subject, obj, old, vectors.get(("fact", f.fact)), counts)
        for e in extraction.endings:
            subject = entities.get(e.subject)
            obj = entities.get(e.object) if e.object else None
            if subject is None or (e.object and obj is None):
                continue
            await self._end(txn, episode, e, subject, obj, vectors.get(("fact", e.fact)), counts)

    async def _fact(self, txn: WriteTxn, episode: Episode, f: ExtractedFact, subject: Entity, obj: Entity,
                    replaced: Entity | None, vector: np.ndarray | None, counts: _Counts) -> None:
        # t: when the statement took effect ("last month" is a month before the message); seen: when we heard it,
        # which is what confidence decays from
        group, seen = episode.group_id, episode.reference_time
        t = _utc(f.valid_from) if f.valid_from is not None else seen
        # the chain as far as it can matter (contract.in_narrowed_chain): the facts of this object and of the one it
        # replaces; for a relation that may hold one value at a time, those still held from t on too
        may_be_exclusive = one_value(f.relation) or f.qualifier is not None or (
            per_qualifier(f.relation) and replaced is not None)
        chain = await txn.facts_between(group, subject.id, f.relation,
                                        objects=(obj.id, *((replaced.id,) if replaced else ())),
                                        held_after=t if may_be_exclusive else None)
        current_same = [x for x in chain if x.object_id == obj.id and valid_at_time(x, t)]
        if current_same:
            x = current_same[0]
            await txn.update_fact(replace(x, confidence=FULL_CONFIDENCE,
                                          last_seen=max(x.last_seen or seen, seen)))
            await txn.add_fact_source(group, x.id, episode.id, episode.source_message_id)
            counts.reinforced += 1
            return
        new_id = fact_id_for(group, subject.id, f.relation, obj.id, t, episode.id)
        qualifier, chain = _qualified(f, chain, replaced)
        exclusive = one_value(f.relation) or qualifier is not None
        def heard_later(x: Fact) -> bool:  # told after this message (an episode that arrived out of order)
            return (x.last_seen or x.valid_at or t) > seen

        # a later fact of an exclusive relation, told later, already ends this one (episodes may arrive out of order)
        later = [x for x in chain if exclusive and x.valid_at is not None and x.valid_at > t and heard_later(x)
                 and x.object_id != obj.id]
        successor = min(later, key=lambda x: x.valid_at) if later else None  # type: ignore[arg-type,return-value]
        new = Fact(id=new_id, group_id=group, subject_id=subject.id, object_id=obj.id, subject_name=subject.name,
                   object_name=obj.name, relation=f.relation, edge_type=f.edge_type, fact=f.fact,
                   confidence=f.confidence, valid_at=t, invalid_at=successor.valid_at if successor else None,
                   created_at=episode.created_at or datetime.now(UTC), superseded_by=successor.id if successor else None,
                   last_seen=seen, episode_ids=(episode.id,), source_message_ids=(episode.source_message_id,),
                   qualifier=qualifier)
        await txn.insert_fact(new, vector)
        counts.added += 1
        now = datetime.now(UTC)
        # held at t, or heard before this message though dated after t ("I live in Leeds" yesterday, then "I moved
        # to York last month": York is the newer word, and Leeds ends as soon as it began)
        ended = [x for x in chain if x.object_id != obj.id and (valid_at_time(x, t) or (
                     x.invalid_at is None and x.valid_at is not None and x.valid_at > t and not heard_later(x)))
                 and ((exclusive and episode.id not in x.episode_ids)  # two values said at once are both held
                      or (replaced is not None and x.object_id == replaced.id))]
        for x in ended:
            await txn.update_fact(replace(x, invalid_at=end_time(x, t), expired_at=now, superseded_by=new_id))
            counts.invalidated += 1
        if replaced is not None and not ended and replaced.id != obj.id and not any(
            x.object_id == replaced.id for x in chain
        ):
            # "moved from Berlin": the earlier state was never stored, but the statement tells us it held until now
            sentence = f"{subject.name} {f.relation.replace('_', ' ')} {replaced.name}"
            history = Fact(id=fact_id_for(group, subject.id, f.relation, replaced.id, None, episode.id), group_id=group,
                           subject_id=subject.id, object_id=replaced.id, subject_name=subject.name,
                           object_name=replaced.name, relation=f.relation, edge_type=f.edge_type, fact=sentence,
                           confidence=f.confidence, valid_at=None, invalid_at=t, created_at=new.created_at,
                           expired_at=now, superseded_by=new_id, last_seen=seen, episode_ids=(episode.id,),
                           source_message_ids=(episode.source_message_id,), qualifier=qualifier)
            await txn.insert_fact(history, None)
            counts.added += 1

    async def _end(self, txn: WriteTxn, episode: Episode, e: ExtractedEnding, subject: Entity, obj: Entity | None,
                   vector: np.ndarray | None, counts: _Counts) -> None:
        """"I no longer work at Lumen": the current fact ends when the statement says; one never held is stored as
        past (valid until then), so "I used to live in Paris" is remembered as history, not as now."""
        group, seen = episode.group_id, episode.reference_time
        t = _utc(e.at) if e.at is not None else seen

        def ends(x: Fact) -> bool:
            # held when it ended, or heard before this message though the end it names is earlier ("I retired
            # last month" after "I'm a teacher" said last week): then it ends when it was heard
            return x.invalid_at is None and (x.valid_at is None or x.valid_at < t or (
                x.valid_at < seen and (x.last_seen or x.valid_at) < seen)) or (
                x.invalid_at is not None and valid_at_time(x, t) and (x.valid_at is None or x.valid_at < t))

        # only a fact still held at t can end, and whether the object was ever held decides the past fact below
        chain = await txn.facts_between(group, subject.id, e.relation, objects=(obj.id,) if obj else (), held_after=t)
        current = [x for x in chain if (obj is None or x.object_id == obj.id) and ends(x)]
        if obj is not None and symmetric(e.relation):  # "Stefan and I split up": held either way round
            current += [x for x in await txn.facts_between(group, obj.id, e.relation, objects=(), held_after=t)
                        if x.object_id == subject.id and ends(x)]
        # "I left Zalando": whichever of them holds Zalando ends; "I retired": all of them end
        for other in e.relations if not current or obj is None else ():
            current += [x for x in await txn.facts_between(group, subject.id, other, objects=(), held_after=t)
                        if (obj is None or x.object_id == obj.id) and ends(x)]
        now = datetime.now(UTC)
        for x in current:
            await txn.update_fact(replace(x, invalid_at=end_time(x, t), expired_at=now))
            await txn.add_fact_source(group, x.id, episode.id, episode.source_message_id)  # the ending's source
            counts.invalidated += 1
        if current or obj is None or any(x.object_id == obj.id for x in chain) or not e.fact:
            return
        past = Fact(id=fact_id_for(group, subject.id, e.relation, obj.id, None, episode.id), group_id=group,
                    subject_id=subject.id, object_id=obj.id, subject_name=subject.name, object_name=obj.name,
                    relation=e.relation, edge_type=e.edge_type, fact=e.fact, confidence=0.8, valid_at=None,
                    invalid_at=t, created_at=episode.created_at or now, expired_at=now, last_seen=seen,
                    episode_ids=(episode.id,), source_message_ids=(episode.source_message_id,))
        await txn.insert_fact(past, vector)
        counts.added += 1

    async def attach(self, episode: Episode, extraction: Extraction, names: Sequence[str] = ()) -> IngestOutcome:
        """Write an extraction made elsewhere as what `episode` (already stored) said: its entities resolved and
        linked to the episode, its facts sourced from it, `names` linked when an entity of the group has them,
        by the rules and in the one transaction ingestion uses. Why: bench_graph_recall's oracle-facts diagnostic
        needs the graph a capable extractor would give over turns already ingested, written the way ingestion
        writes it rather than by a second write path."""
        p = _Prepared(0, episode, False, extraction)
        await self._embed([p])
        counts = _Counts()
        async with self.store.transaction() as txn:
            await self._apply(txn, episode, extraction, p.vectors, counts, tuple(names))
        return IngestOutcome(episode.id, created=False, entities=counts.entities, facts_added=counts.added,
                             facts_reinforced=counts.reinforced, facts_invalidated=counts.invalidated,
                             facts_extracted=extraction.statements, extractor=extraction.extractor)


def _qualified(f: ExtractedFact, chain: list[Fact], replaced: Entity | None) -> tuple[str | None, list[Fact]]:
    """The fact's qualifier, and the facts of its chain it competes with. A relation one value per qualifier
    (takes_medication per condition) holds a value said without one beside the others; a value that replaces
    another ("switched me from ramipril to candesartan") is for what the old one was for; only the facts of the
    same qualifier compete (the replaced one always: it was named)."""
    if not per_qualifier(f.relation):
        return f.qualifier, chain
    qualifier = f.qualifier
    if qualifier is None and replaced is not None:
        qualifier = next((x.qualifier for x in chain if x.object_id == replaced.id and x.invalid_at is None
                          and x.qualifier), None)
    if qualifier is None:
        return None, chain
    key = qualifier_key(qualifier)
    return qualifier, [x for x in chain if (x.qualifier is not None and qualifier_key(x.qualifier) == key)
                       or (replaced is not None and x.object_id == replaced.id)]


def qualifier_key(qualifier: str) -> str:
    """Qualifiers compared as words: "Blood pressure" is "blood pressure"."""
    return " ".join(qualifier.lower().split())


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=UTC)
