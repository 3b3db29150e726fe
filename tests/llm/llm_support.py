"""Helpers shared by the LLM tests (fixtures live in conftest.py)."""

from __future__ import annotations

from dataclasses import replace

from mnemobus.engine.extract import Extraction
from mnemobus.engine.extract_rules import RulesExtractor
from mnemobus.engine.llm import LlmMetrics
from mnemobus.engine.llm.endpoint import RetryPolicy
from mnemobus.store.model import Episode

FAST_RETRY = RetryPolicy(max_retries=2, backoff_base_s=0.01, backoff_max_s=1.0)


def value(metrics: LlmMetrics, name: str, **labels: str) -> float:
    """A sample's value, 0 when the series was never touched."""
    got = metrics.registry.get_sample_value(name, labels or None)
    return 0.0 if got is None else got


async def offline_answer(episode: Episode) -> Extraction:
    """What the tests' fallback (the rules extractor) makes of the episode, labelled with its name as the LLM
    extractor hands it back."""
    return replace(await RulesExtractor().extract(episode), extractor=RulesExtractor.name)
