"""The parser's attribute ruler finds its rules' matches by look-ups (engine/attribute_index.py) instead of spaCy's
Matcher: the matches, and so every tag, part of speech, lemma and morphology the rules read, must be the Matcher's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from spacy.pipeline.attributeruler import AttributeRuler

from mnemobus.engine.attribute_index import AttributeIndex, index_attribute_ruler
from mnemobus.engine.extract_parse import load_pipeline

ROOT = Path(__file__).resolve().parents[2]

# what the model's rules single out: contractions, "ain't" (a rule held twice), dropped g's, spaces, conjunctions
ODD_LINES = [
    "I ain't going, it ain't nothin' ", "We was nothin' and he ain't n't there", "Hello  \n  there\n\n",
    "Y'all can't, I'd've gone 'cause it's late", "That is the one which I said, whether or not you'd come",
    "   ", "I'm, like, SO not into it tho", "She's been to N.Y. twice coz her mum lives there",
]


def _lines() -> list[str]:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_extraction as bench
    from bench_locomo import DEFAULT_PATH
    from extraction_score import load_items

    lines = [ep.content for item in load_items(bench.DATA / "dev.yaml") for ep in bench.episodes_of(item, "x")]
    if DEFAULT_PATH.exists():  # LoCoMo's dev split (../shared/datasets), as bench-locomo reads it
        lines += [turn["text"] for session in _sessions(json.loads(DEFAULT_PATH.read_text())) for turn in session]
    return [*lines, *ODD_LINES]


def _sessions(data: object) -> list[list[dict]]:
    conversation = (data[0] if isinstance(data, list) else data)["conversation"]  # type: ignore[index]
    return [v for k, v in conversation.items() if k.startswith("session_") and isinstance(v, list)]


def test_the_index_finds_the_matchers_matches_in_its_order_on_the_dev_set_and_a_locomo_conversation() -> None:
    nlp = load_pipeline()
    ruler = nlp.get_pipe("attribute_ruler")
    index = AttributeIndex.of(ruler)
    assert index is not None
    docs = list(nlp.pipe(_lines(), disable=["attribute_ruler", "lemmatizer", "ner"]))  # as the ruler sees them
    assert sum(len(d) for d in docs) > 2000
    matched = 0
    for doc in docs:
        expected = AttributeRuler.match(ruler, doc)  # spaCy's own: the Matcher, sorted
        assert index.match(doc) == expected, doc.text
        matched += len(expected)
    assert matched > len(docs)


def test_the_loaded_parser_matches_by_the_index() -> None:
    ruler = load_pipeline().get_pipe("attribute_ruler")
    assert getattr(ruler.match, "__self__", None).__class__ is AttributeIndex


def test_a_ruler_with_a_rule_the_index_cannot_read_keeps_the_matcher() -> None:
    import spacy

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[{"LOWER": "cat"}]], {"LEMMA": "cat"})
    ruler.add([[{"LOWER": "big", "OP": "+"}]], {"LEMMA": "big"})  # an operator: only the Matcher reads it
    assert not index_attribute_ruler(nlp)
    assert getattr(ruler.match, "__func__", None) is AttributeRuler.match
    assert [t.lemma_ for t in nlp("big big cat")] == ["big", "big", "cat"]


@pytest.mark.parametrize("spec", [{"LENGTH": 3}, {"LOWER": {"FUZZY": "cat"}}, {"TAG": {"IN": ["NN", 1]}}])
def test_a_token_test_other_than_equality_a_set_or_a_pattern_is_not_indexed(spec: dict) -> None:
    import spacy

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("attribute_ruler")
    ruler.add([[spec]], {"LEMMA": "x"})
    assert AttributeIndex.of(ruler) is None
