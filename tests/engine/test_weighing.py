"""How a candidate fact's age and reinforcement weigh in ranking (scoring on a fact's Standing)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemobus.engine.recipes import RECIPES
from mnemobus.engine.scoring import age_prior, fact_weight, forgotten
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Standing
from mnemobus.store.model import Fact

NOW = datetime(2026, 6, 1, tzinfo=UTC)
HYBRID = RECIPES["hybrid"]


def _fact(*, valid_days_ago: float | None, learned_days_ago: float, seen_days_ago: float | None = None,
          confidence: float = 0.8) -> Standing:
    def ago(days: float | None) -> datetime | None:
        return None if days is None else NOW - timedelta(days=days)

    return Standing.of(Fact(id="f", group_id=GroupId("user_a"), subject_id="s", object_id="o", subject_name="Ann",
                            object_name="tea", relation="likes", edge_type="semantic", fact="Ann likes tea",
                            confidence=confidence, valid_at=ago(valid_days_ago), invalid_at=None,
                            created_at=ago(learned_days_ago) or NOW, last_seen=ago(seen_days_ago)))


def _prior(fact: Standing) -> float:
    return age_prior(fact.observed_s, NOW.timestamp(), HYBRID.decay_rate, HYBRID.age_floor)


def _weight(fact: Standing) -> float:
    return fact_weight(fact, NOW.timestamp(), decay_rate=HYBRID.decay_rate, age_floor=HYBRID.age_floor,
                       retrieval_boost=0.0)


def test_a_fact_nobody_repeats_ages_from_when_it_became_true() -> None:
    fact = _fact(valid_days_ago=70, learned_days_ago=1)
    floor = HYBRID.age_floor
    assert _prior(fact) == pytest.approx(floor + (1 - floor) * math.exp(-HYBRID.decay_rate * 70))


def test_a_fact_without_a_valid_time_ages_from_when_it_was_learned() -> None:
    assert _prior(_fact(valid_days_ago=None, learned_days_ago=30)) == pytest.approx(
        _prior(_fact(valid_days_ago=30, learned_days_ago=30)))


def test_reinforcement_restores_an_aged_fact() -> None:
    old = _fact(valid_days_ago=200, learned_days_ago=200)
    repeated = _fact(valid_days_ago=200, learned_days_ago=200, seen_days_ago=0)
    assert _prior(repeated) == pytest.approx(1.0) and _prior(old) < 0.7


def test_a_newer_fact_outweighs_an_older_one_of_the_same_confidence() -> None:
    assert _weight(_fact(valid_days_ago=1, learned_days_ago=1)) > _weight(_fact(valid_days_ago=60, learned_days_ago=60))


def test_a_time_in_the_future_never_raises_a_fact_above_its_confidence() -> None:
    assert _prior(_fact(valid_days_ago=-5, learned_days_ago=0)) == pytest.approx(1.0)


@given(days=st.floats(min_value=0, max_value=100 * 365))
def test_age_never_takes_more_than_the_floor_from_a_fact(days: float) -> None:
    fact = _fact(valid_days_ago=days, learned_days_ago=days)
    assert HYBRID.age_floor <= _prior(fact) <= 1.0
    assert _weight(fact) >= HYBRID.age_floor * _weight(_fact(valid_days_ago=0, learned_days_ago=0))


def test_without_a_forgetting_policy_no_age_forgets_a_fact() -> None:
    assert not forgotten(_fact(valid_days_ago=50_000, learned_days_ago=50_000), NOW.timestamp(), None)


def test_a_forgetting_policy_forgets_only_what_was_not_observed_for_longer() -> None:
    assert forgotten(_fact(valid_days_ago=400, learned_days_ago=400), NOW.timestamp(), 365)
    assert not forgotten(_fact(valid_days_ago=400, learned_days_ago=400, seen_days_ago=10), NOW.timestamp(), 365)
