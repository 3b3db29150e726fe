"""Goal series encode ok / violated / unknown unambiguously, in the registry the process exports."""

from __future__ import annotations

from datetime import datetime, timezone

from prometheus_client import CollectorRegistry

from mnemobus.shared.metrics import PipelineMetrics
from worldstate.evaluate import GoalTracker, evaluate
from worldstate.goals import Goal
from worldstate.metrics import WorldstateMetrics

NOW = datetime(2026, 11, 22, tzinfo=timezone.utc)
GOAL = Goal.model_validate({"id": "memory.dlq_empty", "description": "d", "severity": "medium",
                            "selector": "domains.memory.data.dlqSize", "operator": "eq", "threshold": 0})
LABELS = {"goal": "memory.dlq_empty", "severity": "medium"}


def judged(registry: CollectorRegistry, data: dict | None) -> tuple[float | None, float | None]:
    metrics = WorldstateMetrics(registry)
    metrics.declare([GOAL])
    document = {"domains": {"memory": {"_available": True, "collectedAt": NOW.isoformat(), "data": data}}} if data is not None else {}
    results = evaluate([GOAL], document, NOW, 60)
    metrics.record(results, GoalTracker().update(results, NOW))
    return (registry.get_sample_value("mnemobus_goal_satisfied", LABELS),
            registry.get_sample_value("mnemobus_goal_known", LABELS))


def test_satisfied_goal_is_1_and_known() -> None:
    assert judged(CollectorRegistry(), {"dlqSize": 0}) == (1.0, 1.0)


def test_violated_goal_is_0_and_known() -> None:
    assert judged(CollectorRegistry(), {"dlqSize": 2}) == (0.0, 1.0)


def test_unknown_goal_is_0_and_not_known() -> None:
    assert judged(CollectorRegistry(), None) == (0.0, 0.0)


def test_goal_series_share_the_pipeline_registry() -> None:
    pipeline = PipelineMetrics()
    WorldstateMetrics(pipeline.registry).declare([GOAL])
    assert pipeline.registry.get_sample_value("mnemobus_goal_known", LABELS) == 0.0
    assert pipeline.registry.get_sample_value("mnemobus_goal_for_seconds", LABELS) == 0.0
