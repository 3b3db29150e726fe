"""Grafana files are checked structurally (no Grafana server is installable here) and their PromQL by promtool."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Literal

import yaml
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field

from mnemobus.shared.metrics import PipelineMetrics
from test_prometheus_rules import ROOT, promtool
from worldstate.metrics import WorldstateMetrics

GRAFANA = ROOT / "deploy" / "grafana"
RECORDED = {"mnemobus:recall_fail_open:ratio_rate5m"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Query(_Strict):
    refId: str
    datasourceUid: str
    relativeTimeRange: dict[str, int] | None = None
    model: dict[str, Any]


class AlertRule(_Strict):
    uid: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,40}$")
    title: str
    condition: str
    for_: str = Field(alias="for", pattern=r"^\d+[smh]$")
    labels: dict[str, str]
    annotations: dict[str, str]
    noDataState: Literal["Alerting", "NoData", "OK", "KeepLast"]
    execErrState: Literal["Alerting", "Error", "OK", "KeepLast"]
    isPaused: bool
    data: list[Query]


class AlertGroup(_Strict):
    orgId: int
    name: str
    folder: str
    interval: str
    rules: list[AlertRule]


class AlertFile(_Strict):
    apiVersion: Literal[1]
    groups: list[AlertGroup]


def exported_names() -> set[str]:
    """Every series name a mnemobus process with the worldstate role exports."""
    registry = CollectorRegistry()
    PipelineMetrics(registry)
    WorldstateMetrics(registry)
    names = set()
    for metric in registry.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(metric.type, ("",))
        names.update(metric.name + suffix for suffix in suffixes)
    return names


def dashboard_exprs() -> list[str]:
    dash = json.loads((GRAFANA / "dashboards" / "mnemobus.json").read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def alert_exprs() -> list[str]:
    out = []
    for path in sorted((GRAFANA / "provisioning" / "alerting").glob("*.yaml")):
        for group in AlertFile.model_validate(yaml.safe_load(path.read_text())).groups:
            out += [q.model["expr"] for r in group.rules for q in r.data if q.datasourceUid != "__expr__"]
    return out


def test_alert_provisioning_files_have_grafana_shape() -> None:
    files = sorted((GRAFANA / "provisioning" / "alerting").glob("*.yaml"))
    assert files
    for path in files:
        for group in AlertFile.model_validate(yaml.safe_load(path.read_text())).groups:
            for rule in group.rules:
                refs = {q.refId for q in rule.data}
                assert rule.condition in refs, f"{rule.uid}: condition {rule.condition} is not a query refId"
                for q in rule.data:
                    if q.datasourceUid == "__expr__":
                        assert q.model["expression"] in refs, f"{rule.uid}/{q.refId} reads an unknown refId"
                assert "severity" in rule.labels


def test_dashboard_panels_have_unique_ids_and_fit_the_grid() -> None:
    dash = json.loads((GRAFANA / "dashboards" / "mnemobus.json").read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) and dash["uid"]
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        assert p["targets"], p["title"]


def test_grafana_queries_only_read_series_we_export() -> None:
    known = exported_names() | RECORDED | {"up"}
    for expr in dashboard_exprs() + alert_exprs():
        used = set(re.findall(r"\b(mnemobus[:_][a-z0-9_:]+)", expr))
        assert used and used <= known, f"{expr}: unknown series {used - known}"


def test_grafana_queries_are_valid_promql(tmp_path: Path) -> None:
    rules = [{"record": f"check:expr{i}", "expr": e.replace("$__rate_interval", "5m")}
             for i, e in enumerate(dashboard_exprs() + alert_exprs())]
    path = tmp_path / "grafana-exprs.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "grafana", "rules": rules}]}))
    result = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
