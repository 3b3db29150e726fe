"""`resolve` and `time_phrase` skip their searches on a text holding none of the words a time phrase needs
(engine/when.py `_NEEDS`): that shortcut must never change an answer."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mnemobus.engine import when
from mnemobus.engine.when import _MAY_NAME_A_TIME, _NEEDS, _PATTERNS, resolve, time_phrase

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = (datetime(2026, 6, 15, 12, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC))
# each kind of phrase, in other cases and spellings, and letters that fold to ASCII under IGNORECASE
# (the long s, the Kelvin sign), and words that only look like one ("decided", "every day", "before")
TIMES = [
    "I moved on 14 June", "on the 3rd of Sept. 2021 we met", "June 14th, 2019 was great", "in May 2020",
    "since 2015", "back in 1999", "two weeks ago", "a couple of years ago", "15 days ago", "YESTERDAY it rained",
    "see you tomorrow", "last month", "laſt month", "next quarter", "this year", "last summer", "in the fall",
    "next winter", "on Friday", "last Monday", "this SUNDAY", "in Sept.", "since March", "by Dec", "from jan",
    "for the past 3 years", "for eight years", "for a few weeks", "I decided to go", "every day", "before the fall",
    "Mayday", "in Decemberish", "\u212aelvin", "I'm 34", "on 31 February", "the 5th", "for storage",
    "in the spring of 2022", "moved to Leeds in March last year", "",
]


def _corpus() -> list[str]:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_extraction as bench
    from bench_locomo import DEFAULT_PATH
    from extraction_score import load_items

    lines = [ep.content for item in load_items(bench.DATA / "dev.yaml") for ep in bench.episodes_of(item, "x")]
    if DEFAULT_PATH.exists():  # LoCoMo's dev split (../shared/datasets)
        data = json.loads(DEFAULT_PATH.read_text())
        conversation = (data[0] if isinstance(data, list) else data)["conversation"]
        lines += [turn["text"] for k, v in conversation.items() if k.startswith("session_") and isinstance(v, list)
                  for turn in v]
    return [*lines, *TIMES]


def test_every_pattern_says_what_its_matches_need() -> None:
    assert set(_NEEDS) == {kind for kind, _ in _PATTERNS}


def test_a_text_any_pattern_matches_holds_what_the_guard_looks_for() -> None:
    matched = [t for t in _corpus() if any(p.search(t) for _, p in _PATTERNS)]
    assert len(matched) > 40
    assert [t for t in matched if _MAY_NAME_A_TIME.search(t) is None] == []


def test_words_that_only_look_like_a_time_do_not_pass_the_guard() -> None:
    assert [t for t in ("I decided to go", "every day", "Mayday", "in Decemberish", "I use vim")
            if _MAY_NAME_A_TIME.search(t)] == []


@pytest.mark.parametrize("flags", [{}, {"future": True}, {"past": True}, {"perfect": True}])
def test_resolve_and_time_phrase_answer_as_they_do_without_the_guard(monkeypatch: pytest.MonkeyPatch,
                                                                       flags: dict[str, bool]) -> None:
    texts = _corpus()
    guarded = [(resolve(t, ref, **flags), _span(time_phrase(t))) for t in texts for ref in REFERENCES]
    monkeypatch.setattr(when, "_MAY_NAME_A_TIME", re.compile(""))  # matches every text: the searches always run
    assert guarded == [(resolve(t, ref, **flags), _span(time_phrase(t))) for t in texts for ref in REFERENCES]
    assert sum(r is not None for r, _ in guarded) > 20


def _span(m: re.Match[str] | None) -> tuple[int, int, str] | None:
    return None if m is None else (m.start(), m.end(), m.group(0))
