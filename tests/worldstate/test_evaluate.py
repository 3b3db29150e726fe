"""Goal judgement on whole snapshots: only fresh, available, matching data can make a goal ok."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from worldstate.evaluate import GoalTracker, evaluate_goal
from worldstate.goals import Goal

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def goal(**kw: Any) -> Goal:
    base: dict[str, Any] = {"id": "memory.dlq_empty", "description": "d", "severity": "medium",
                            "selector": "domains.memory.data.dlqSize", "operator": "eq", "threshold": 0}
    return Goal.model_validate({**base, **kw})


def doc(data: dict[str, Any], *, available: bool = True, age_s: float = 0) -> dict[str, Any]:
    return {"domains": {"memory": {"_available": available, "errors": {} if available else {"dlq": "timeout"},
                                   "collectedAt": (NOW - timedelta(seconds=age_s)).isoformat(), "data": data}}}


def test_goal_holding_on_fresh_data_is_ok() -> None:
    assert evaluate_goal(goal(), doc({"dlqSize": 0}), NOW, 60).state == "ok"


def test_goal_not_holding_is_violated() -> None:
    assert evaluate_goal(goal(), doc({"dlqSize": 3}), NOW, 60).state == "violated"


def test_selector_matching_nothing_is_unknown_not_ok() -> None:
    r = evaluate_goal(goal(operator="ne", threshold=5), doc({}), NOW, 60)
    assert r.state == "unknown" and "matched nothing" in r.reason


def test_unavailable_domain_makes_goal_unknown_even_with_a_value() -> None:
    assert evaluate_goal(goal(), doc({"dlqSize": 0}, available=False), NOW, 60).state == "unknown"


def test_stale_domain_data_makes_goal_unknown() -> None:
    r = evaluate_goal(goal(), doc({"dlqSize": 0}, age_s=120), NOW, 60)
    assert r.state == "unknown" and "old" in r.reason


def test_domain_never_polled_is_unknown() -> None:
    assert evaluate_goal(goal(selector="domains.graph.data.x"), doc({"dlqSize": 0}), NOW, 60).state == "unknown"


def test_boolean_is_not_compared_as_a_number() -> None:
    assert evaluate_goal(goal(operator="lt", threshold=1), doc({"dlqSize": False}), NOW, 60).state == "unknown"


def test_ordering_operators_compare_numbers() -> None:
    g = goal(selector="domains.memory.data.consumerLag", operator="lt", threshold=1000)
    assert evaluate_goal(g, doc({"consumerLag": 999}), NOW, 60).state == "ok"
    assert evaluate_goal(g, doc({"consumerLag": 1000}), NOW, 60).state == "violated"


def test_violation_is_announced_only_after_its_for_duration() -> None:
    g = goal(**{"for": "30s"})
    tracker = GoalTracker()
    bad = evaluate_goal(g, doc({"dlqSize": 1}), NOW, 60)
    assert tracker.update([evaluate_goal(g, doc({"dlqSize": 0}), NOW, 60)], NOW) == []
    assert tracker.update([bad], NOW) == []
    assert tracker.public_state(bad) == "pending"
    assert tracker.update([bad], NOW + timedelta(seconds=29)) == []
    fired = tracker.update([bad], NOW + timedelta(seconds=30))
    assert [(t.previous, t.state) for t in fired] == [("ok", "violated")]
    assert fired[0].since == NOW


def test_unchanged_state_is_announced_once() -> None:
    tracker = GoalTracker()
    bad = evaluate_goal(goal(), doc({"dlqSize": 1}), NOW, 60)
    announced = [t for i in range(5) for t in tracker.update([bad], NOW + timedelta(seconds=i))]
    assert [(t.previous, t.state) for t in announced] == [(None, "violated")]


def test_recovery_is_announced_at_once() -> None:
    g = goal(**{"for": "5m"})
    tracker = GoalTracker()
    tracker.update([evaluate_goal(g, doc({"dlqSize": 1}), NOW, 60)], NOW)
    tracker.update([evaluate_goal(g, doc({"dlqSize": 1}), NOW, 60)], NOW + timedelta(minutes=5))
    back = tracker.update([evaluate_goal(g, doc({"dlqSize": 0}), NOW, 60)], NOW + timedelta(minutes=6))
    assert [(t.previous, t.state, t.to_json()["event"]) for t in back] == [("violated", "ok", "resolved")]


def test_pending_violation_that_clears_announces_nothing() -> None:
    g = goal(**{"for": "1m"})
    tracker = GoalTracker()
    tracker.update([evaluate_goal(g, doc({"dlqSize": 0}), NOW, 60)], NOW)
    tracker.update([evaluate_goal(g, doc({"dlqSize": 1}), NOW, 60)], NOW + timedelta(seconds=10))
    assert tracker.update([evaluate_goal(g, doc({"dlqSize": 0}), NOW, 60)], NOW + timedelta(seconds=20)) == []
