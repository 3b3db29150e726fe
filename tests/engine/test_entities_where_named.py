"""The entity recogniser runs only on lines that may name something (extract_parse.needs_entities): the time it
saves must cost no fact, so the labelled dev set extracts the same as with the recogniser on every line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mnemobus.engine import extract_parse
from mnemobus.engine.extract_parse import ParsedExtractor, needs_entities

ROOT = Path(__file__).resolve().parents[2]


def test_lowercase_talk_with_only_i_and_function_words_capitalised_needs_no_entities() -> None:
    assert not any(needs_entities(t) for t in ("I use vim every day.", "My sister lives nearby. We're close.",
                                              "just chatting about tea, I'm tired"))


def test_a_capitalised_name_anywhere_or_a_digit_needs_entities() -> None:
    assert all(needs_entities(t) for t in ("Oliver is a vet.", "I moved to Leeds.", "I'm 34", "my dog Rex barks"))


def test_the_dev_set_extracts_the_same_as_with_the_recogniser_on_every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_extraction as bench
    from extraction_score import load_items

    items = load_items(bench.DATA / "dev.yaml")
    episodes = [ep for item in items for ep in bench.episodes_of(item, f"x_{item.id}")]
    texts = [ep.content for ep in episodes]
    assert 0 < sum(not needs_entities(t) for t in texts) < len(texts)  # both kinds of line are in the set
    extractor = ParsedExtractor()
    selective = extractor.extract_batch(episodes)
    monkeypatch.setattr(extract_parse, "needs_entities", lambda text: True)
    assert selective == extractor.extract_batch(episodes)
