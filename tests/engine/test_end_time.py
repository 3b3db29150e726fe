"""When an ended fact ends: at the statement's time, never before the fact began (ingest.end_time, one rule for a
new value that replaces the old and for an explicit ending)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from engine_support import T0, make_episode

from mnemobus.engine import MemoryEngine
from mnemobus.engine.ingest import end_time
from mnemobus.store.model import Fact

G = "user_a"


def fact(valid_at=None) -> Fact:  # type: ignore[no-untyped-def]
    return Fact(id="f", group_id=G, subject_id="s", object_id="o", subject_name="Ana", object_name="Oslo",
                relation="lives_in", edge_type="semantic", fact="Ana lives in Oslo", confidence=0.8,
                valid_at=valid_at, invalid_at=None, created_at=T0)


def test_a_fact_that_began_before_the_statement_ends_at_the_statement() -> None:
    assert end_time(fact(T0), T0 + timedelta(days=3)) == T0 + timedelta(days=3)


def test_a_fact_with_no_start_ends_at_the_statement() -> None:
    assert end_time(fact(None), T0) == T0


def test_a_fact_that_began_after_the_statement_ends_as_it_began() -> None:
    assert end_time(fact(T0 + timedelta(days=5)), T0) == T0 + timedelta(days=5)


def test_a_fact_that_began_at_the_statement_ends_then() -> None:
    assert end_time(fact(T0), T0) == T0


@pytest.mark.anyio
async def test_an_ending_dated_before_the_fact_began_ends_it_at_its_start_end_to_end(engine: MemoryEngine) -> None:
    await engine.ingest(make_episode(G, "I work at Siemens.", days=30))
    await engine.ingest(make_episode(G, "I left Siemens last month.", days=40))  # a month back: day 10
    (job,) = await engine.edge_history(G, "User", "works_at")
    assert job.object_name == "Siemens" and job.invalid_at == job.valid_at == T0 + timedelta(days=30)
