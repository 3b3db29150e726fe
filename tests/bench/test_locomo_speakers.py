"""bench/locomo_speakers.py's count of whose turns the evidence is, on a hand-made conversation."""

from __future__ import annotations

from bench.locomo_speakers import named_speaker, speaker_split

SAMPLE = {
    "conversation": {
        "speaker_a": "Ann Lee", "speaker_b": "Bo",
        "session_1": [{"dia_id": "D1:1", "speaker": "Ann Lee", "text": "I paint."},
                      {"dia_id": "D1:2", "speaker": "Bo", "text": "I swim."}],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
    },
    "qa": [
        {"question": "What does Ann do?", "category": 1, "evidence": ["D1:1"]},
        {"question": "What does Ann swim in?", "category": 5, "evidence": ["D1:2; D1:1"]},
        {"question": "What do Ann and Bo do?", "category": 4, "evidence": ["D1:1", "D1:2"]},
        {"question": "What did Annie say?", "category": 4, "evidence": ["D1:1"]},
    ],
}


def test_a_speaker_named_by_first_name_is_named() -> None:
    assert speaker_split(SAMPLE)["multi-hop"] == {"named": 1, "other": 0, "unnamed": 0}


def test_each_evidence_turn_of_a_question_counts_by_its_own_speaker() -> None:
    assert speaker_split(SAMPLE)["adversarial"] == {"named": 1, "other": 1, "unnamed": 0}


def test_a_question_naming_both_or_neither_speaker_is_counted_apart() -> None:
    assert speaker_split(SAMPLE)["single-hop"] == {"named": 0, "other": 0, "unnamed": 2}


def test_a_question_names_a_speaker_by_a_whole_first_name_only() -> None:
    assert named_speaker("What did Annie say?", ["Ann Lee", "Bo"]) is None
    assert named_speaker("Where did Bo go?", ["Ann Lee", "Bo"]) == "Bo"
