"""Extraction and embeddings over any OpenAI-compatible endpoint, built from config.

`client` speaks the chat wire, `answer` and `prompt` shape one extraction call,
`extractor` runs it (with the offline fallback), `mapping` turns its answer into an
Extraction, `budget` caps tokens per hour, `embedder` is the `/embeddings` Embedder;
`endpoint` holds what both share (timeouts, retries, the key). Their series: LlmMetrics
in mnemobus/shared/metrics.py.
"""

from __future__ import annotations

from mnemobus.shared.config import EndpointSettings, ExtractionSettings, LlmSettings, OpenAIEmbeddingSettings
from mnemobus.engine.extract import Extractor
from mnemobus.engine.llm.budget import TokenBudget
from mnemobus.engine.llm.client import ChatClient
from mnemobus.engine.llm.embedder import OpenAIEmbedder
from mnemobus.engine.llm.endpoint import RetryPolicy
from mnemobus.engine.llm.extractor import LlmExtractor
from mnemobus.shared.metrics import LlmMetrics

__all__ = ["LlmExtractor", "LlmMetrics", "OpenAIEmbedder", "build_extractor", "build_embedder"]


def _retry(cfg: EndpointSettings) -> RetryPolicy:
    return RetryPolicy(cfg.max_retries, cfg.backoff_base_s, cfg.backoff_max_s)


def chat_client(llm: LlmSettings, metrics: LlmMetrics, concurrency: int | None = None) -> ChatClient:
    """A client of the configured chat endpoint (extraction, community summaries)."""
    return ChatClient(llm.base_url, llm.model, api_key=llm.resolved_api_key(), timeout_s=llm.timeout_s,
                      connect_timeout_s=llm.connect_timeout_s, retry=_retry(llm),
                      concurrency=concurrency or llm.concurrency, metrics=metrics)


def build_extractor(cfg: ExtractionSettings, offline: Extractor, metrics: LlmMetrics) -> Extractor:
    """The configured extractor; `llm` keeps `offline` as its per-episode fallback."""
    if cfg.extractor == "offline":
        return offline
    llm = cfg.llm
    client = chat_client(llm, metrics)
    return LlmExtractor(client, offline, structured_output=llm.structured_output, max_tokens=llm.max_tokens,
                        temperature=llm.temperature, budget=TokenBudget(llm.tokens_per_hour), metrics=metrics,
                        max_candidate_entities=llm.max_candidate_entities,
                        max_candidate_facts=llm.max_candidate_facts, max_message_chars=llm.max_message_chars,
                        max_entities=llm.max_entities, max_facts=llm.max_facts)


def build_embedder(cfg: OpenAIEmbeddingSettings, batch_size: int, metrics: LlmMetrics) -> OpenAIEmbedder:
    return OpenAIEmbedder(cfg.base_url, cfg.model, cfg.dim, api_key=cfg.resolved_api_key(), batch_size=batch_size,
                          timeout_s=cfg.timeout_s, connect_timeout_s=cfg.connect_timeout_s, retry=_retry(cfg),
                          metrics=metrics)
