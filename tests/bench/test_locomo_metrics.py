"""The LoCoMo bench's recall@k arithmetic on tiny hand-made data (no model, no store)."""

from __future__ import annotations

import pytest

from bench.bench_locomo import (
    BM25,
    facts_by_conversation,
    merge_ranked,
    normalise_evidence,
    per_category,
    recall_at_k,
    session_time,
)


def test_recall_counts_evidence_found_in_the_first_k() -> None:
    assert recall_at_k(["D1:1", "D1:2", "D1:3"], ["D1:2", "D9:9"], 3) == 0.5


def test_recall_ignores_hits_after_k() -> None:
    assert recall_at_k(["D1:1", "D1:2", "D1:3"], ["D1:3"], 2) == 0.0


def test_recall_counts_distinct_ids_towards_k() -> None:
    assert recall_at_k(["D1:1", "D1:1", "D1:2"], ["D1:2"], 2) == 1.0


def test_recall_without_evidence_is_an_error() -> None:
    with pytest.raises(ValueError):
        recall_at_k(["D1:1"], [], 5)


def test_evidence_strings_with_several_ids_are_split_and_deduplicated() -> None:
    assert normalise_evidence(["D8:6; D9:17", "D8:6"]) == ["D8:6", "D9:17"]


def test_evidence_ids_that_name_no_turn_are_dropped() -> None:
    assert normalise_evidence(["D1:1", "D30:5"], known={"D1:1"}) == ["D1:1"]


def test_merge_ranks_facts_and_episodes_together_by_score() -> None:
    facts = [(0.5, ("D1:1",)), (0.1, ("D1:9",))]
    episodes = [(0.3, "D1:2")]
    assert merge_ranked(facts, episodes, 3) == ["D1:1", "D1:2", "D1:9"]


def test_merge_expands_a_fact_into_all_its_source_ids() -> None:
    assert merge_ranked([(1.0, ("D1:1", "D2:2"))], [(0.5, "D3:3")], 5) == ["D1:1", "D2:2", "D3:3"]


def test_merge_dedupes_before_cutting_at_k() -> None:
    facts = [(0.9, ("D1:1",))]
    episodes = [(0.8, "D1:1"), (0.7, "D1:2"), (0.6, "D1:3")]
    assert merge_ranked(facts, episodes, 2) == ["D1:1", "D1:2"]


def test_per_category_means_and_overall_over_questions() -> None:
    out = per_category([(1, 1.0), (1, 0.0), (4, 1.0)])
    assert out == {"multi-hop": 0.5, "single-hop": 1.0, "overall": pytest.approx(2 / 3)}


def test_bm25_prefers_the_shorter_document_for_the_same_term() -> None:
    bm = BM25([["cat", "sat"], ["dog", "sat"], ["cat", "dog", "sat"]])
    assert bm.top(["dog"], 1) == [1]  # both hold "dog"; the shorter document wins


def test_bm25_returns_nothing_for_a_term_no_document_has() -> None:
    assert BM25([["cat"], ["dog"]]).top(["unknown"], 3) == []


def test_session_time_parses_locomo_dates() -> None:
    assert session_time("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"


def test_fts5_match_quotes_every_word_so_none_is_an_operator() -> None:
    from bench.bench_locomo import fts5_match

    assert fts5_match(["or", "not", 'say"hi', "or"]) == '"or" OR "not" OR "say""hi"'


def test_facts_figures_per_conversation_score_each_ones_own_questions_and_turns() -> None:
    convs = [{"group": "locomo_0", "turns": [("D1:1", "", None)] * 4, "questions": [("q", 1, ["D1:1"])]},
             {"group": "locomo_1", "turns": [("D1:1", "", None)] * 2,
              "questions": [("q", 1, ["D1:1"]), ("q", 4, ["D1:2"])]}]
    figures = {"engine_facts_locomo_0": 2, "engine_facts_locomo_1": 1}
    out = facts_by_conversation(convs, [["D1:1"], ["D1:9"], ["D1:2"]], figures)
    assert out == {"facts_only_recall_at_10_locomo_0": 1.0, "facts_per_100_turns_locomo_0": 50.0,
                   "facts_only_recall_at_10_locomo_1": 0.5, "facts_per_100_turns_locomo_1": 50.0}
