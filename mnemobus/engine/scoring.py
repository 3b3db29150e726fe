"""Fusion and weighting: pure functions, so every backend ranks the same candidates the same way."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from mnemobus.store.contract import Standing

SECONDS_PER_DAY = 86400.0


def rrf(rankings: Iterable[Sequence[str]], k: float = 60.0, weights: Sequence[float] | None = None) -> dict[str, float]:
    """Weighted reciprocal rank fusion, normalised so a first place in every list scores 1.

    Rank positions, not raw scores, so BM25 and cosine need no calibration; the
    normalisation makes facts (three lists) and messages (two) comparable.
    """
    lists = list(rankings)
    w = list(weights) if weights is not None else [1.0] * len(lists)
    total = sum(w) or 1.0  # lists that found nothing still count: one weak signal alone scores low
    fused: dict[str, float] = {}
    for wi, ranking in zip(w, lists):
        for rank, item in enumerate(dict.fromkeys(ranking)):
            fused[item] = fused.get(item, 0.0) + wi * (k + 1) / (k + rank + 1)
    return {item: score / total for item, score in fused.items()}


def days_between(earlier_s: float, later_s: float) -> float:
    return max(0.0, (later_s - earlier_s) / SECONDS_PER_DAY)


def age_prior(observed_s: float, at_s: float, rate: float, floor: float) -> float:
    """How much age, since something was last observed, leaves of its score: from 1 down to `floor`, never lower.

    Age ranks, it never erases: a fact nobody repeated for years still comes back for a search that matches it
    better than anything fresh, while of two close matches the recent one leads. Reinforcement restores it."""
    return floor + (1.0 - floor) * math.exp(-rate * days_between(observed_s, at_s))


def forgotten(fact: Standing, at_s: float, forget_after_days: float | None) -> bool:
    """The explicit forgetting policy: off unless configured; then a fact not observed for that long is not
    recalled (it stays stored, for as-of queries and its history)."""
    return forget_after_days is not None and days_between(fact.observed_s, at_s) > forget_after_days


def retrieval_weight(count: int, boost: float) -> float:
    """Facts recalled often rise a little; capped so popularity never beats relevance."""
    return min(1.5, 1.0 + boost * math.log1p(max(0, count)))


def fact_weight(fact: Standing, at_s: float, *, decay_rate: float, age_floor: float, retrieval_boost: float) -> float:
    """Ranking weight: confidence and age reorder facts of close relevance, within bounds relevance outweighs.

    The square root keeps a fact at confidence 0.5 within ~30% of a certain one."""
    return (math.sqrt(max(0.0, fact.confidence)) * age_prior(fact.observed_s, at_s, decay_rate, age_floor)
            * retrieval_weight(fact.retrieval_count, retrieval_boost))
