"""goals.yaml is refused, not half-loaded, when wrong; the error names file, goal, field and reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemobus.shared.errors import ConfigError
from worldstate.goals import load_config
from worldstate_support import GOALS_FILE

GOOD = """
goals:
  - id: memory.worker_alive
    description: a worker beats
    severity: critical
    selector: domains.memory.data.workerAlive
    operator: eq
    threshold: true
    for: 2m
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "goals.yaml"
    path.write_text(text)
    return path


def test_shipped_goals_file_loads_and_covers_the_failure_modes() -> None:
    ids = {g.id for g in load_config(GOALS_FILE).goals}
    assert {"memory.store_healthy", "memory.search_working", "memory.worker_alive", "memory.consumer_lag_low",
            "memory.dlq_empty", "memory.fail_open_rate_low", "memory.pipeline_flowing", "bus.connected"} <= ids


def test_for_accepts_prometheus_style_durations(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, GOOD)).goals[0].for_s == 120


def test_unknown_operator_is_refused_naming_file_goal_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("operator: eq", "operator: gte"))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value)
    assert "goal 'memory.worker_alive': field 'operator'" in str(err.value)
    assert "'gte'" in str(err.value)


def test_unknown_severity_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="field 'severity'"):
        load_config(write(tmp_path, GOOD.replace("severity: critical", "severity: warning")))


def test_ordering_operator_with_boolean_threshold_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="numeric threshold"):
        load_config(write(tmp_path, GOOD.replace("operator: eq", "operator: lt")))


def test_selector_outside_domain_data_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="field 'selector'"):
        load_config(write(tmp_path, GOOD.replace("domains.memory.data.workerAlive", "memory.workerAlive")))


def test_duplicate_goal_ids_are_refused(tmp_path: Path) -> None:
    twice = GOOD + GOOD.split("goals:\n", 1)[1]
    with pytest.raises(ConfigError, match="defined twice"):
        load_config(write(tmp_path, twice))


def test_goal_without_id_is_named_by_position(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"goal #1 \(no id\): field 'id'"):
        load_config(write(tmp_path, GOOD.replace("id: memory.worker_alive", "name: x")))


def test_unknown_top_level_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="field 'poll_intervall_s'"):
        load_config(write(tmp_path, "poll_intervall_s: 5\n" + GOOD))


def test_missing_file_is_an_error_not_an_empty_goal_list(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")
