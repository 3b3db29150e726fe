"""The memory engine: one facade over a GraphStore, an extractor and an embedder.

The worker calls `ingest`, the plugin, API and probes call `recall`; the
other methods are the graph tools (entity search, traversal, as-of
snapshots, edge history). Nothing here knows which backend it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
import anyio.to_thread

from mnemobus.engine.embed import Embedder
from mnemobus.engine.extract import Extractor, LosesWork
from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.engine.graph_recall import HopSkipped
from mnemobus.engine.ingest import Disambiguator, ExtractionObserver, Ingestor, word_subset_disambiguator
from mnemobus.engine.recall import checked_groups, recall
from mnemobus.engine.relations import Meaning
from mnemobus.engine.recipes import DEFAULT_RECIPE, RECIPES, Recipe, recipe_named
from mnemobus.engine.scoring import rrf
from mnemobus.engine.text import display_name, normalise_name, query_terms
from mnemobus.shared.errors import EntityExists, InvalidMessage, StoreIntegrityError
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import FactHop, GraphStore, neighbourhood
from mnemobus.store.model import EdgeType, Entity, Episode, Fact, IngestOutcome, RecallQuery, RecallResult

__all__ = ["MemoryEngine", "ScoredEntity"]

log = logging.getLogger("mnemobus.engine")


@dataclass(frozen=True, slots=True)
class ScoredEntity:
    entity: Entity
    score: float


class MemoryEngine:
    def __init__(self, store: GraphStore, extractor: Extractor | None = None, embedder: Embedder | None = None,
                 disambiguator: Disambiguator = word_subset_disambiguator,
                 recipes: Mapping[str, Recipe] = RECIPES, meaning: Meaning | None = None) -> None:
        self.store = store
        self.recipes = recipes
        self.extractor = extractor or ParsedExtractor()
        self.embedder = embedder
        self._ingestor = Ingestor(store, self.extractor, embedder, disambiguator, meaning)
        self._warming_claimed = False
        self._hop_skipped: list[HopSkipped] = []
        self._extractor_failed: list[Callable[[], None]] = []
        if isinstance(self.extractor, LosesWork):
            self.extractor.on_failure.append(self._extractor_failure)

    def claim_warming(self) -> bool:
        """True once per engine: the first role that serves recalls loads the indexes, the others do not again."""
        first, self._warming_claimed = not self._warming_claimed, True
        return first

    async def ingest(self, episode: Episode) -> IngestOutcome:
        """One transaction, idempotent by episode id; InvalidMessage for bad input, StoreUnavailable for transient."""
        return await self._ingestor.ingest(episode)

    def observe_extraction(self, observer: ExtractionObserver) -> None:
        """Tell `observer(extractor, episodes, seconds)` after every extraction call (the worker's metrics)."""
        self._ingestor.observers.append(observer)

    def overlapping_batches(self) -> None:
        """Told by a caller that ingests batches side by side (the worker's `batches_in_flight`): they already put
        a second core to work, so `parse_child: auto` leaves every batch here (parse_process.py)."""
        self._ingestor.overlapping = True

    async def ingest_many(self, episodes: Sequence[Episode]) -> list[IngestOutcome | BaseException]:
        """A batch (what the worker fetched): one embedding call for all, one transaction per episode.

        Slot i holds episode i's outcome or the exception it alone raised
        (InvalidMessage, StoreUnavailable, ...); the others are unaffected.
        """
        return await self._ingestor.ingest_many(episodes)

    def observe_graph_skips(self, observer: HopSkipped) -> None:
        """Tell `observer(group, first_hop_ms)` whenever graph recall skips its second hop for its time bound
        (the process's metrics: open_runtime)."""
        self._hop_skipped.append(observer)

    def _graph_skipped(self, group: GroupId, first_hop_ms: float) -> None:
        for observe in self._hop_skipped:
            observe(group, first_hop_ms)

    def observe_extractor_failures(self, observer: Callable[[], None]) -> None:
        """Tell `observer()` whenever the extractor loses work it was given (a parse child that died or hung: its
        chunks fail and are redelivered), whichever extractor it is (the process's metrics: open_runtime)."""
        self._extractor_failed.append(observer)

    def _extractor_failure(self) -> None:
        for observe in self._extractor_failed:
            observe()

    async def recall(self, query: RecallQuery) -> RecallResult:
        return await recall(self.store, self.embedder, query, self.recipes, self._graph_skipped)

    async def close(self) -> None:
        """The store, and the HTTP clients of an LLM extractor or endpoint embedder."""
        try:
            if (aclose := getattr(self.extractor, "aclose", None)) is not None:
                await aclose()
            if (close := getattr(self.embedder, "close", None)) is not None:
                await anyio.to_thread.run_sync(close)
        finally:
            await self.store.close()

    # -- graph tools -------------------------------------------------------------

    def _group(self, group_id: str) -> GroupId:
        return checked_groups([group_id])[0]

    async def search_entities(self, group_id: str, text: str, limit: int = 10) -> list[ScoredEntity]:
        """Entities by name, alias or meaning, fused by reciprocal rank."""
        group = self._group(group_id)
        rankings = []
        terms = query_terms(text) or [normalise_name(text)]
        rankings.append([h.id for h in await self.store.search_entities_text(group, terms, limit * 2)])
        if self.embedder is not None and text.strip():
            vec = (await anyio.to_thread.run_sync(self.embedder.embed, [text]))[0]
            floor = recipe_named(DEFAULT_RECIPE, self.recipes).min_entity_similarity
            rankings.append([h.id for h in await self.store.search_entities_vector(group, vec, limit * 2)
                             if h.score >= floor])
        fused = rrf(rankings)
        best = sorted(fused, key=lambda i: -fused[i])[:limit]
        return [ScoredEntity(e, fused[e.id]) for e in await self.store.get_entities(group, best)]

    async def find_entity(self, group_id: str, name: str) -> Entity | None:
        """Exact alias match first, then the best entity search hit."""
        group = self._group(group_id)
        async with self.store.transaction() as txn:  # read through the writer: sees the latest aliases
            found = await txn.entity_by_alias(group, normalise_name(name))
        if found is not None:
            return found
        hits = await self.search_entities(group, name, 1)
        return hits[0].entity if hits else None

    async def graph_traverse(self, group_id: str, start_entity: str, *, relations: Sequence[str] | None = None,
                             edge_types: Sequence[EdgeType] | None = None, max_hops: int = 2, limit: int = 20,
                             as_of: datetime | None = None) -> list[FactHop]:
        """Facts reachable from the named entity, nearest first (seed 002's graph_traverse tool)."""
        group = self._group(group_id)
        start = await self.find_entity(group, start_entity)
        if start is None:
            return []
        return await neighbourhood(self.store, group, [start.id], as_of=as_of or datetime.now(UTC),
                                   max_hops=max(1, min(max_hops, 6)), relations=relations, edge_types=edge_types,
                                   limit=limit)

    async def facts_as_of(self, group_id: str, as_of: datetime, limit: int = 1000) -> list[Fact]:
        return await self.store.facts_valid_at(self._group(group_id), as_of, limit)

    async def edge_history(self, group_id: str, entity: str, relation: str | None = None) -> list[Fact]:
        group = self._group(group_id)
        start = await self.find_entity(group, entity)
        return [] if start is None else await self.store.edge_history(group, start.id, relation)

    async def episodes(self, group_id: str, last_n: int = 10) -> list[Episode]:
        return await self.store.episodes(self._group(group_id), last_n)

    async def add_entity(self, group_id: str, entity_id: str, name: str, summary: str = "") -> Entity:
        """An entity a caller names directly (Graphiti's POST /entity-node), searchable at once.

        Idempotent for the same id; a name the group already knows under another id is refused with that id,
        rather than a second entity for one thing."""
        group = self._group(group_id)
        canonical, shown = normalise_name(name), display_name(name)
        if not canonical:
            raise InvalidMessage("empty_name", "an entity needs a name with at least one visible character")
        vector = None
        if self.embedder is not None:
            vector = (await anyio.to_thread.run_sync(self.embedder.embed, [shown]))[0]
        now = datetime.now(UTC)
        same_id = await self.store.get_entities(group, [entity_id])
        if same_id:
            if same_id[0].canonical_name != canonical:
                raise EntityExists(f"entity id {entity_id!r} already names {same_id[0].name!r}", entity_id)
            return same_id[0]
        entity = Entity(id=entity_id, group_id=group, name=shown, canonical_name=canonical, summary=summary,
                        first_seen=now, last_seen=now)
        try:
            async with self.store.transaction() as txn:
                known = await txn.entity_by_alias(group, canonical)
                if known is None:
                    await txn.insert_entity(entity, vector)
        except StoreIntegrityError as exc:  # ids are global: this one names an entity of another group
            raise EntityExists(f"entity id {entity_id!r} is taken", entity_id) from exc
        if known is not None:
            raise EntityExists(f"group {group!r} already has {shown!r} as entity {known.id!r}", known.id)
        stored = await self.store.get_entities(group, [entity_id])
        return stored[0] if stored else entity  # the group was deleted since (another process): it was created
