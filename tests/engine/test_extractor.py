"""The regex rules: the statements of the seeds become the right facts, lists become one fact per item."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mnemobus.engine.extract_rules import extract_text

T = datetime(2026, 6, 1, tzinfo=UTC)


def triples(text: str) -> list[tuple[str, str, str]]:
    return [(f.subject, f.relation, f.object) for f in extract_text(text).facts]


@pytest.mark.parametrize(("text", "want"), [
    ("I moved from Berlin to London.", [("User", "lives_in", "London")]),
    ("I switched from vim to neovim.", [("User", "uses", "neovim")]),
    ("Alex works on ProjectX.", [("Alex", "works_on", "ProjectX")]),
    ("We decided to adopt pgvector.", [("User", "decided_to_adopt", "pgvector")]),
    ("Josh prefers concise answers.", [("Josh", "prefers", "concise answers")]),
])
def test_the_seed_statements_become_the_right_facts(text: str, want: list[tuple[str, str, str]]) -> None:
    assert triples(text) == want


def test_a_list_of_objects_becomes_one_fact_per_item() -> None:
    assert triples("I use vim, tmux and zsh every day.") == [
        ("User", "uses", "vim"), ("User", "uses", "tmux"), ("User", "uses", "zsh")]
    assert triples("Alex works on ProjectX and ProjectY.") == [
        ("Alex", "works_on", "ProjectX"), ("Alex", "works_on", "ProjectY")]


def test_a_clause_after_and_is_not_taken_for_a_list_item() -> None:
    assert triples("I use vim and love it.") == [("User", "uses", "vim")]
    assert triples("I live in Berlin and I work at Acme.") == [("User", "lives_in", "Berlin"), ("User", "works_at", "Acme")]


def test_a_relation_with_one_object_at_a_time_takes_no_list() -> None:
    """Living in three cities at once would make each a contradiction of the others: only the first is kept."""
    assert triples("I live in Berlin, London and Paris.") == [("User", "lives_in", "Berlin")]


@pytest.mark.parametrize("text", ["Sounds like a great plan!", "Events like these are great.", "Looks like fun."])
def test_like_as_a_preposition_makes_no_fact(text: str) -> None:
    assert triples(text) == []


def test_like_as_a_verb_agrees_with_its_subject() -> None:
    assert triples("I like tea. Melanie loves painting.") == [("User", "likes", "tea"), ("Melanie", "likes", "painting")]


@pytest.mark.parametrize(("text", "days"), [
    ("I moved from Berlin to London last month.", 30),
    ("I switched from vim to neovim two weeks ago", 14),
    ("Last year, I moved to Rome.", 365),
    ("I moved to Paris 3 years ago", 3 * 365),
    ("I use vim", 0),
])
def test_a_past_time_phrase_dates_the_fact_before_the_message_and_leaves_the_object(text: str, days: int) -> None:
    (fact,) = extract_text(text, reference_time=T).facts
    assert (fact.valid_from or T) == T - timedelta(days=days)
    assert not any(w in fact.object.lower().split() for w in ("last", "ago", "weeks", "years", "month"))


def test_a_future_time_phrase_is_not_taken_for_a_past_one() -> None:
    assert extract_text("I live in Oslo and will move next month", reference_time=T).facts[0].valid_from is None
