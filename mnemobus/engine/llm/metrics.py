"""The series of the LLM extractor and the OpenAI-compatible embedder, on the registry the caller passes in.

Every call to an endpoint is counted by outcome, every retry by reason and every
episode that went to the offline extractor instead by reason, so a dead, slow or
over-budget model shows up on a dashboard and not only in a log.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)


class LlmMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "mnemobus_llm_calls_total", "HTTP calls to the model endpoint by endpoint (chat, embeddings) and outcome "
            "(ok, rate_limited, server_error, client_error, timeout, transport, bad_response)",
            ["endpoint", "outcome"], registry=r)
        self.retries = Counter(
            "mnemobus_llm_retries_total", "Calls repeated after a failure, by endpoint and the failure's outcome",
            ["endpoint", "reason"], registry=r)
        self.call_seconds = Histogram(
            "mnemobus_llm_call_duration_seconds", "Time of one HTTP call to the model endpoint, by endpoint",
            ["endpoint"], buckets=_CALL_BUCKETS, registry=r)
        self.tokens = Counter(
            "mnemobus_llm_tokens_total", "Tokens the endpoint reported using, by kind (prompt, completion)",
            ["kind"], registry=r)
        self.answers = Counter(
            "mnemobus_llm_answers_total", "Structured answers by validation outcome (valid, invalid)",
            ["outcome"], registry=r)
        self.extractions = Counter(
            "mnemobus_llm_extractions_total", "Episodes extracted, by who did it (llm, offline_fallback)",
            ["extractor"], registry=r)
        self.fallbacks = Counter(
            "mnemobus_llm_fallbacks_total", "Episodes the offline extractor took over, by reason (budget, "
            "unavailable, timeout, refused, bad_response, invalid_answer)", ["reason"], registry=r)
        self.budget_remaining = Gauge(
            "mnemobus_llm_budget_remaining_tokens", "Tokens left in the rolling hourly budget (-1: no budget)",
            registry=r)
        self.in_flight = Gauge(
            "mnemobus_llm_calls_in_flight", "Chat calls running now (at most llm.concurrency)", registry=r)
