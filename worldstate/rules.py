"""Prometheus alert rules generated from goals.yaml: one rule per goal, with that goal's `for` and severity.

Prometheus applies `for` per rule, not per series, so per-goal durations need
per-goal rules; generating them keeps goals.yaml the single source. A test
fails when the committed file is out of date.

    python -m worldstate.rules [goals.yaml] > deploy/prometheus/rules/mnemobus-goals.rules.yml
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from worldstate.goals import WorldstateConfig, format_duration, load_config

HEADER = ("# GENERATED from workspace/goals.yaml by `python -m worldstate.rules`; do not edit by hand.\n"
          "# One rule per goal: fires when the goal was judged unsatisfied (on fresh data) for its `for`.\n")


def goal_rules(config: WorldstateConfig) -> dict[str, Any]:
    rules = []
    for g in config.goals:
        sel = f'{{goal="{g.id}"}}'
        rule: dict[str, Any] = {
            "alert": "MnemobusGoalUnsatisfied",
            "expr": f"mnemobus_goal_satisfied{sel} == 0 and mnemobus_goal_known{sel} == 1",
        }
        if g.for_s > 0:
            rule["for"] = format_duration(g.for_s)
        rule["labels"] = {"severity": g.severity, "goal": g.id}  # distinct label sets keep promtool lint quiet
        rule["annotations"] = {
            "summary": f"Goal {g.id} not satisfied",
            "description": f"{g.description} ({g.selector} {g.operator} {g.threshold!r} does not hold"
                           f" on {{{{ $labels.instance }}}}).",
        }
        rules.append(rule)
    return {"groups": [{"name": "mnemobus-goals", "rules": rules}]}


def render(config: WorldstateConfig) -> str:
    return HEADER + yaml.safe_dump(goal_rules(config), sort_keys=False, width=200, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    sys.stdout.write(render(load_config(args[0] if args else None)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
