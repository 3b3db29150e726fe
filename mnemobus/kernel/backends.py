"""Config -> the engine's parts: the store, extractor and embedder the config names, each looked up among the
registered ones (mnemobus/kernel/builtin_parts.py and any installed package's hooks), so the engine never knows which
backend it holds and a new backend needs no edit here."""

from __future__ import annotations

import functools
import logging

import anyio.to_thread

from mnemobus.kernel import extensions
from mnemobus.shared.config import ExtractionSettings, Settings
from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import MODELS, CachedEmbedder, Embedder, LocalOnnxEmbedder
from mnemobus.engine.embedders import LOCAL_EMBEDDER
from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.engine.parse_process import ProcessSplitExtractor
from mnemobus.engine.llm.embedder import OpenAIEmbedder
from mnemobus.engine.llm.endpoint import EndpointError
from mnemobus.engine.recipes import tuned
from mnemobus.engine.relation_meaning import RelationMeaning
from mnemobus.shared.metrics import LlmMetrics
from mnemobus.store.contract import GraphStore

__all__ = ["build_store", "open_engine"]

log = logging.getLogger("mnemobus.backends")


def build_store(settings: Settings, dim: int) -> GraphStore:
    """The store `store.backend` names, not yet opened."""
    extensions.check_parts(settings)
    return extensions.stores()[settings.store.backend](settings, dim)


async def _check_endpoint_embedder(embedder: Embedder) -> None:
    """A wrong dimension refuses start (ConfigError naming the key); an endpoint that is down only warns: the
    worker retries its batches and recall fails open until it is back."""
    try:
        await anyio.to_thread.run_sync(embedder.embed, ["dimension check"])
    except EndpointError as exc:
        log.warning("the embedding endpoint did not answer at start (%s); going on", exc)


async def open_engine(settings: Settings, llm_metrics: LlmMetrics | None = None) -> MemoryEngine:
    extensions.check_parts(settings)
    metrics = llm_metrics or LlmMetrics()
    embedder = extensions.embedders()[settings.memory.embedding.provider](settings, metrics)
    if isinstance(embedder, OpenAIEmbedder):
        await _check_endpoint_embedder(embedder)
    extractor = extensions.extractors()[settings.extraction.extractor](
        settings, offline_parser(settings.extraction, embedder=settings.memory.embedding.provider), metrics)
    store = build_store(settings, embedder.dim)
    await store.open()
    meaning = relation_meaning(settings)  # its model loads when the process first ingests (Ingestor._canonical)
    return MemoryEngine(store, extractor, embedder,
                        recipes=tuned(settings.memory.recall.model_dump(exclude_unset=True)),
                        meaning=meaning.nearest if meaning is not None else None)


def offline_parser(extraction: ExtractionSettings, *, embedder: str) -> ParsedExtractor | ProcessSplitExtractor:
    """The offline extractor as configured: with `parse_child`, a batch's parse shared with a second core (with
    `auto`, while the machine has one to spare, and not beside the local embedder: `embedder` is
    memory.embedding.provider)."""
    if not extraction.parse_child or (extraction.parse_child == "auto" and embedder == LOCAL_EMBEDDER):
        return ParsedExtractor()
    return ProcessSplitExtractor(auto=extraction.parse_child == "auto")


def relation_meaning(settings: Settings) -> RelationMeaning | None:
    """The semantic fallback of relation mapping, on the local sentence model (the transformer itself: a relation
    phrase is a few words, where the static table is weakest; each name is embedded once), unless turned off."""
    threshold = settings.extraction.relation_threshold
    if threshold is None:
        return None
    model = settings.memory.embedding.model
    return shared_meaning(model if model in MODELS else next(iter(MODELS)), threshold)


@functools.cache
def shared_meaning(model: str, threshold: float) -> RelationMeaning:
    """One per process and setting: every runtime a process opens (tests, a bench's services) shares the loaded
    model and the embedded phrases instead of loading them again."""
    return RelationMeaning(CachedEmbedder(LocalOnnxEmbedder(model)), threshold)
