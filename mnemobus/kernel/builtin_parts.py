"""The stores, extractors and embedders mnemobus ships, registered through the same hooks a package uses to add one
(as datasette registers its own facets through `register_facet_classes`), so config names them all one way.

Each factory imports its implementation when called: the Neo4j driver, the ONNX runtime and the HTTP client load
only in a process that uses them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemobus.shared.errors import ConfigError
from mnemobus.kernel.hooks import EmbedderFactory, ExtractorFactory, StoreFactory, hookimpl

if TYPE_CHECKING:
    from mnemobus.shared.config import Settings
    from mnemobus.engine.embed import Embedder
    from mnemobus.engine.extract import Extractor
    from mnemobus.shared.metrics import LlmMetrics
    from mnemobus.store.contract import GraphStore


def sqlite_store(settings: "Settings", dim: int) -> "GraphStore":
    from mnemobus.store.sqlite import SqliteStore

    return SqliteStore(settings.store.sqlite_path, dim=dim, vector_cache_mb=settings.store.vector_cache_mb,
                       reads_on_loop=settings.store.sqlite_reads_on_loop)


def neo4j_store(settings: "Settings", dim: int) -> "GraphStore":
    try:
        from mnemobus.store.neo4j import Neo4jStore  # type: ignore[attr-defined]
    except ImportError as exc:
        raise ConfigError(f"store.backend: neo4j backend is not available: {exc}") from exc
    return Neo4jStore.from_settings(settings.store.neo4j, dim=dim, vector_cache_mb=settings.store.vector_cache_mb)


def offline_extractor(settings: "Settings", offline: "Extractor", metrics: "LlmMetrics") -> "Extractor":
    return offline


def llm_extractor(settings: "Settings", offline: "Extractor", metrics: "LlmMetrics") -> "Extractor":
    from mnemobus.engine.llm import build_extractor

    return build_extractor(settings.extraction, offline, metrics)


def _made(provider: str) -> EmbedderFactory:
    def factory(settings: "Settings", metrics: "LlmMetrics") -> "Embedder":
        from mnemobus.engine.embedders import make_embedder

        emb = settings.memory.embedding
        return make_embedder(provider, emb.model, emb.cache_dir)

    return factory


def openai_embedder(settings: "Settings", metrics: "LlmMetrics") -> "Embedder":
    from mnemobus.engine.llm import build_embedder

    emb = settings.memory.embedding
    return build_embedder(emb.openai, emb.batch_size, metrics)


@hookimpl
def mnemobus_stores() -> dict[str, StoreFactory]:
    return {"sqlite": sqlite_store, "neo4j": neo4j_store}


@hookimpl
def mnemobus_extractors() -> dict[str, ExtractorFactory]:
    return {"offline": offline_extractor, "llm": llm_extractor}


@hookimpl
def mnemobus_embedders() -> dict[str, EmbedderFactory]:
    return {"local": _made("local"), "static": _made("static"), "hash": _made("hash"), "openai": openai_embedder}
