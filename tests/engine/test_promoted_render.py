"""Promoted memories in the context block: first, within their reserved share, the rest left to recall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from mnemobus.engine.promoted import PROMOTED_HEADER, render_with_promoted
from mnemobus.engine.render import render_context
from mnemobus.shared.groups import GroupId
from mnemobus.store.lifecycle import Promoted
from mnemobus.store.model import Fact, RecallResult, ScoredFact

G = GroupId("user_josh")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def memory(i: int, text: str) -> Promoted:
    return Promoted(id=f"p{i}", group_id=G, kind="decision", scope="user", text=text, author="josh",
                    created_at=T0 + timedelta(minutes=i))


def recalled(*texts: str) -> RecallResult:
    facts = tuple(ScoredFact(Fact(id=f"f{i}", group_id=G, subject_id="a", object_id="b", subject_name="a",
                                  object_name="b", relation="r", edge_type="semantic", fact=t, confidence=0.9,
                                  valid_at=None, invalid_at=None, created_at=T0), 1.0 - i / 10)
                  for i, t in enumerate(texts))
    return RecallResult(facts=facts, groups=(G,))


def test_promoted_memories_come_first_under_their_own_header() -> None:
    block = render_with_promoted(recalled("josh lives in Oslo"), [memory(1, "Ship on Fridays")], 2000, 0.3)
    assert block.splitlines() == [PROMOTED_HEADER, "- decision: Ship on Fridays", "[User context \u2014 user_josh]",
                                  "- josh lives in Oslo"]


def test_promoted_memories_never_take_more_than_their_share() -> None:
    many = [memory(i, f"rule number {i} " + "x" * 60) for i in range(10)]
    block = render_with_promoted(recalled(), many, 400, 0.3)
    assert len(block) <= 120 and block.count("- decision:") == 1


def test_what_promoted_memories_leave_unused_goes_to_recall() -> None:
    facts = recalled(*[f"fact {i} " + "y" * 40 for i in range(20)])
    assert render_with_promoted(facts, [], 1000, 0.3) == render_context(facts, 1000)
