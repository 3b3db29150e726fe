"""bench/graph_oracle.py: LoCoMo's observations read as the oracle extraction of the graph-recall diagnostic."""

from __future__ import annotations

import json
from pathlib import Path

from bench.graph_oracle import RELATION, Observation, observations, oracle_extraction, topics
from mnemobus.engine.extract_parse import load_pipeline


def test_observations_keep_the_known_evidence_of_each_and_drop_one_without_any(tmp_path: Path) -> None:
    data = [{"observation": {"session_1_observation": {"Ana": [
        ["Ana adopted a puppy called Biscuit.", "D1:3"],
        ["Ana moved to Leeds.", ["D1:4", "D9:9"]],
        ["Ana said something no turn holds.", "D7:1"],
    ]}}}]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(data))
    assert observations(path, 0, {"D1:3", "D1:4"}) == [
        Observation("Ana", "Ana adopted a puppy called Biscuit.", ("D1:3",)),
        Observation("Ana", "Ana moved to Leeds.", ("D1:4",)),
    ]


def test_topics_are_the_noun_phrases_without_determiners_pronouns_or_the_speaker() -> None:
    said = topics(load_pipeline(), "Caroline attended an LGBTQ support group and found her friends there.", "Caroline")
    assert said == ["LGBTQ support group", "friends"]


def test_the_oracle_extraction_links_the_speaker_to_each_topic_with_the_observation_as_the_fact() -> None:
    obs = Observation("Melanie", "Melanie painted a lake sunrise last year.", ("D1:14",))
    extraction = oracle_extraction(load_pipeline(), obs)
    assert [(f.subject, f.relation, f.object, f.fact) for f in extraction.facts] == [
        ("Melanie", RELATION, "lake sunrise", obs.sentence)]
    assert [(e.name, e.type) for e in extraction.entities] == [("Melanie", "person"), ("lake sunrise", "thing")]
