# World state (issue 6): promtool for the alert-rule tests, rules generated from goals.yaml.
# `promtool` extracts Debian's promtool to .tools/promtool (instant when present);
# tests/worldstate/test_prometheus_rules.py fails, never skips, without it.

_WORLDSTATE_MK_GOAL := $(.DEFAULT_GOAL)

PROMTOOL       := .tools/promtool
WS_PYTHON      ?= $(if $(wildcard .venv/bin/python),.venv/bin/python,python3)

TEST_PREREQS += promtool

.PHONY: promtool goal-rules

promtool:
	@sh deploy/prometheus/install-promtool.sh

## regenerate the per-goal Prometheus alert rules after editing workspace/goals.yaml
goal-rules:
	$(WS_PYTHON) -m worldstate.rules workspace/goals.yaml > deploy/prometheus/rules/mnemobus-goals.rules.yml

.DEFAULT_GOAL := $(_WORLDSTATE_MK_GOAL)
