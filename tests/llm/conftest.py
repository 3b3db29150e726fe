"""LLM fixtures: a scripted fake endpoint per test, the real local model server once per session."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemobus.engine.extract_rules import RulesExtractor
from mnemobus.engine.llm import LlmExtractor, LlmMetrics
from mnemobus.engine.llm.budget import TokenBudget
from mnemobus.engine.llm.client import ChatClient
from mnemobus.engine.llm.endpoint import RetryPolicy
from mnemobus.kernel.llama_local import LocalLlama

from fake_openai import FakeOpenAI, fake_openai
from llm_support import FAST_RETRY


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with fake_openai() as server:
        yield server


@pytest.fixture
def llm_metrics() -> LlmMetrics:
    return LlmMetrics()


@pytest.fixture
async def make_extractor(llm_metrics: LlmMetrics) -> AsyncIterator[Callable[..., LlmExtractor]]:
    """An LlmExtractor against `url` with fast retries; keywords go to ChatClient or LlmExtractor."""
    made: list[LlmExtractor] = []

    def make(url: str, *, model: str = "fake", api_key: str | None = None, timeout_s: float = 5.0,
             retry: RetryPolicy = FAST_RETRY, concurrency: int = 2, tokens_per_hour: int = 0,
             **extractor_kw: Any) -> LlmExtractor:
        client = ChatClient(url, model, api_key=api_key, timeout_s=timeout_s, retry=retry, concurrency=concurrency,
                            metrics=llm_metrics)
        extractor_kw.setdefault("structured_output", "json_object_schema")
        ex = LlmExtractor(client, RulesExtractor(), budget=TokenBudget(tokens_per_hour), metrics=llm_metrics,
                          **extractor_kw)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        await ex.aclose()


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLlama]:
    """The real model server: started once, on a free loopback port; fails (never skips) when it is not built."""
    server = LocalLlama(log_path=Path(tmp_path_factory.mktemp("llama")) / "server.log")
    server.start()
    yield server
    server.stop()
