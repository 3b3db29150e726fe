"""Graph recall's second hop (query entity -> fact -> entity -> the turns that mention it) is skipped once the
first has taken `memory.recall.graph_time_budget_ms`: recall then misses what lies one fact away, so each skip is
counted (`mnemobus_recall_graph_hops_skipped_total`) and logged. Through POST /search on a running service."""

from __future__ import annotations

import logging

import pytest

from mnemobus.engine import graph_recall
from mnemobus.shared.config import RecallTuning, Settings
from mnemobus.shared.logthrottle import ThrottledLog
from tests.api.conftest import Api
from tests.api.graph_doors import QUESTION, told

pytestmark = pytest.mark.anyio
SKIPPED = "mnemobus_recall_graph_hops_skipped_total"


@pytest.fixture
def budget_ms() -> float:
    return 10_000.0


@pytest.fixture
def settings(settings: Settings, budget_ms: float) -> Settings:
    """The suite's settings with spreading activation on and the second hop's time bound set by `budget_ms`."""
    tuning = RecallTuning(graph="activation", graph_time_budget_ms=budget_ms)
    return settings.model_copy(update={"memory": settings.memory.model_copy(update={"recall": tuning})})


async def asked(api: Api, group: str) -> None:
    """Sofia's turns in (Sofia -> a fact -> Biscuit), then one question naming Sofia over POST /search."""
    await told(api.rt, group)
    r = await api.http.post("/search", json={"group_ids": [group], "query": QUESTION, "max_facts": 10},
                            headers=api.auth)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("budget_ms", [0.0])
async def test_a_second_hop_skipped_for_its_time_bound_is_counted_and_logged(
        api: Api, group_id: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_recall, "_skip_log", ThrottledLog(graph_recall.log))  # no line held back by another test
    with caplog.at_level(logging.WARNING, logger=graph_recall.log.name):
        await asked(api, group_id)
    assert api.rt.metrics.registry.get_sample_value(SKIPPED) == 1
    assert any("skipped the second hop for " + group_id in r.getMessage() for r in caplog.records)


async def test_a_second_hop_within_its_time_bound_is_not_counted(api: Api, group_id: str) -> None:
    await asked(api, group_id)
    assert api.rt.metrics.registry.get_sample_value(SKIPPED) == 0
