"""How a candidate fact's age and reinforcement weigh in ranking (scoring on a fact's Standing)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from mnemobus.engine.scoring import decayed_confidence, fact_weight
from mnemobus.groups import GroupId
from mnemobus.store.contract import Standing
from mnemobus.store.model import Fact

NOW = datetime(2026, 6, 1, tzinfo=UTC)
RATE = 0.01  # per day, the default recipe's decay and recency rate


def _fact(*, valid_days_ago: float | None, learned_days_ago: float, seen_days_ago: float | None = None) -> Fact:
    def ago(days: float | None) -> datetime | None:
        return None if days is None else NOW - timedelta(days=days)

    return Fact(id="f", group_id=GroupId("user_a"), subject_id="s", object_id="o", subject_name="Ann",
                object_name="tea", relation="likes", edge_type="semantic", fact="Ann likes tea", confidence=0.8,
                valid_at=ago(valid_days_ago), invalid_at=None, created_at=ago(learned_days_ago) or NOW,
                last_seen=ago(seen_days_ago))


def _decayed(fact: Fact) -> float:
    return decayed_confidence(Standing.of(fact), NOW.timestamp(), RATE)


def test_a_fact_nobody_repeats_decays_from_when_it_became_true() -> None:
    fact = _fact(valid_days_ago=70, learned_days_ago=1)
    assert _decayed(fact) == pytest.approx(0.8 * math.exp(-RATE * 70))


def test_a_fact_without_a_valid_time_decays_from_when_it_was_learned() -> None:
    fact = _fact(valid_days_ago=None, learned_days_ago=30)
    assert _decayed(fact) == pytest.approx(0.8 * math.exp(-RATE * 30))


def test_reinforcement_restores_a_fading_fact() -> None:
    old = _fact(valid_days_ago=200, learned_days_ago=200)
    repeated = _fact(valid_days_ago=200, learned_days_ago=200, seen_days_ago=0)
    assert _decayed(repeated) == pytest.approx(0.8)
    assert _decayed(old) < 0.2 < _decayed(repeated)


def test_a_newer_fact_outweighs_an_older_one_of_the_same_confidence() -> None:
    def weight(fact: Fact) -> float:
        return fact_weight(Standing.of(fact), NOW.timestamp(), decayed=_decayed(fact), recency_rate=RATE,
                           retrieval_boost=0.0)

    assert weight(_fact(valid_days_ago=1, learned_days_ago=1)) > weight(_fact(valid_days_ago=60, learned_days_ago=60))


def test_a_time_in_the_future_never_raises_a_fact_above_its_confidence() -> None:
    ahead = _fact(valid_days_ago=-5, learned_days_ago=0)  # valid from next week: not aged, and not boosted
    assert _decayed(ahead) == pytest.approx(0.8)
