"""Graph recall's configuration: `memory.recall.graph` and its parameters are validated keys, refused by name when
wrong, and set from the environment like every key. What it recalls, through every door and on both stores, is
tests/api/graph_doors.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mnemobus.shared.config import Settings


def test_an_unknown_graph_mode_is_refused_naming_the_key() -> None:
    with pytest.raises(ValidationError, match=r"memory\.recall\.graph"):
        Settings(memory={"recall": {"graph": "pagerank"}})


def test_a_graph_parameter_out_of_range_is_refused_naming_the_key() -> None:
    with pytest.raises(ValidationError, match=r"memory\.recall\.graph_decay"):
        Settings(memory={"recall": {"graph_decay": 1.5}})


def test_more_graph_slots_than_turns_shown_are_refused_naming_the_key() -> None:
    with pytest.raises(ValidationError, match=r"memory\.recall\.graph_episode_slots"):
        Settings(memory={"recall": {"graph_episode_slots": 11}})


def test_the_graph_mode_can_be_set_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMOBUS_MEMORY__RECALL__GRAPH", "ppr")
    assert Settings().memory.recall.graph == "ppr"
