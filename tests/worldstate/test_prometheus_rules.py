"""The alert rules we ship are valid, up to date with goals.yaml, and behave as promtool's unit tests say.

These tests fail (never skip) without promtool: `make promtool` or
deploy/prometheus/install-promtool.sh puts it at .tools/promtool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from worldstate.goals import load_config
from worldstate.rules import render
from worldstate_support import GOALS_FILE

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"


def promtool() -> str:
    for candidate in (os.environ.get("PROMTOOL"), str(ROOT / ".tools" / "promtool"), shutil.which("promtool")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise AssertionError("promtool not found (looked at $PROMTOOL, .tools/promtool, PATH): "
                         "run `make promtool` or deploy/prometheus/install-promtool.sh")


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=PROM, capture_output=True, text=True, timeout=120)


def test_generated_goal_rules_match_goals_yaml() -> None:
    committed = (PROM / "rules" / "mnemobus-goals.rules.yml").read_text()
    assert committed == render(load_config(GOALS_FILE)), "run `make goal-rules` after editing workspace/goals.yaml"


def test_every_goal_has_one_rule_carrying_its_severity() -> None:
    rules = yaml.safe_load((PROM / "rules" / "mnemobus-goals.rules.yml").read_text())["groups"][0]["rules"]
    assert {r["labels"]["goal"]: r["labels"]["severity"] for r in rules} == {
        g.id: g.severity for g in load_config(GOALS_FILE).goals}


def test_rule_files_pass_promtool_check() -> None:
    result = run_promtool("check", "rules", "rules/mnemobus-goals.rules.yml", "rules/mnemobus.rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_scrape_config_passes_promtool_check() -> None:
    result = run_promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_rule_unit_tests_pass() -> None:
    result = run_promtool("test", "rules", "tests/rules_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
