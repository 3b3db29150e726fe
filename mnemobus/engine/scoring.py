"""Fusion and weighting: pure functions, so every backend ranks the same candidates the same way."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

from mnemobus.store.model import Fact

SECONDS_PER_DAY = 86400.0


def rrf(rankings: Iterable[Sequence[str]], k: float = 60.0) -> dict[str, float]:
    """Reciprocal rank fusion: rank positions, not raw scores, so BM25 and cosine need no calibration."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(dict.fromkeys(ranking)):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank + 1)
    return fused


def days_between(earlier: datetime | None, later: datetime) -> float:
    if earlier is None:
        return 0.0
    return max(0.0, (later - earlier).total_seconds() / SECONDS_PER_DAY)


def last_observed(fact: Fact) -> datetime | None:
    return fact.last_seen or fact.valid_at or fact.created_at


def decayed_confidence(fact: Fact, at: datetime, rate: float) -> float:
    """c * exp(-rate * days since last observed): facts nobody repeats fade, reinforcement restores them."""
    return fact.confidence * math.exp(-rate * days_between(last_observed(fact), at))


def recency(fact: Fact, at: datetime, rate: float) -> float:
    return 1.0 / (1.0 + rate * days_between(fact.valid_at or fact.created_at, at))


def retrieval_weight(count: int, boost: float) -> float:
    """Facts recalled often rise a little; capped so popularity never beats relevance."""
    return min(1.5, 1.0 + boost * math.log1p(max(0, count)))


def fact_weight(fact: Fact, at: datetime, *, decay_rate: float, recency_rate: float, retrieval_boost: float) -> float:
    return (
        decayed_confidence(fact, at, decay_rate)
        * (0.75 + 0.25 * recency(fact, at, recency_rate))
        * retrieval_weight(fact.retrieval_count, retrieval_boost)
    )
