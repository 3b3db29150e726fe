"""`workspace/goals.yaml` -> validated goals and poller settings.

Goals are data an operator edits, so a mistake must stop start-up with the
file, the goal id, the field and the reason: a goal that silently never
evaluates is worse than no goal, because it looks like coverage.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mnemobus.shared import subjects
from mnemobus.shared.errors import ConfigError
from mnemobus.shared.groups import InvalidGroupId, validate_group_id

DEFAULT_GOALS_FILE = Path("workspace/goals.yaml")
GOALS_FILE_ENV = "MNEMOBUS_GOALS"

Severity = Literal["critical", "high", "medium", "low"]
Operator = Literal["eq", "ne", "lt", "le", "gt", "ge"]
#: the one severity vocabulary, most urgent first; YAML, metric labels, alerts and transitions all use it
SEVERITIES: tuple[str, ...] = ("critical", "high", "medium", "low")

_GOAL_ID = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")  # fullmatch: "$" lets a trailing newline through
_SELECTOR = re.compile(r"domains\.[A-Za-z0-9_-]+\.data(\.[A-Za-z0-9_-]+)+")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a Prometheus-style string ("30s", "2m"), so both files read alike."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '30s', '2m', '1h'")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.fullmatch(value.strip())):
        seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    else:
        raise ValueError(f"{value!r} is not a duration (use seconds or '30s', '2m', '1h')")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


def format_duration(seconds: float) -> str:
    """The Prometheus spelling of a duration, for generated alert rules."""
    whole = int(round(seconds))
    if whole and whole % 3600 == 0:
        return f"{whole // 3600}h"
    if whole and whole % 60 == 0:
        return f"{whole // 60}m"
    return f"{whole}s"


class Goal(BaseModel):
    """One expectation about the polled world: `selector operator threshold`, held for `for`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str
    description: str = Field(min_length=1)
    severity: Severity
    selector: str
    operator: Operator
    threshold: bool | int | float | str
    for_s: float = Field(default=0.0, alias="for")

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _GOAL_ID.fullmatch(v):
            raise ValueError("must be lowercase dot-separated words of [a-z0-9_-] (it becomes a NATS subject)")
        return v

    @field_validator("selector")
    @classmethod
    def _selector(cls, v: str) -> str:
        if not _SELECTOR.fullmatch(v):
            raise ValueError("must look like domains.<domain>.data.<key>[.<key>...]")
        return v

    @field_validator("for_s", mode="before")
    @classmethod
    def _for(cls, v: Any) -> float:
        return parse_duration(v)

    @model_validator(mode="after")
    def _threshold_fits_operator(self) -> "Goal":
        ordered = self.operator in ("lt", "le", "gt", "ge")
        numeric = isinstance(self.threshold, (int, float)) and not isinstance(self.threshold, bool)
        if ordered and not numeric:
            raise ValueError(f"operator {self.operator!r} needs a numeric threshold, got {self.threshold!r}")
        return self

    @property
    def domain(self) -> str:
        return self.selector.split(".")[1]

    @property
    def subject(self) -> str:
        """Where transitions of this goal are published (dotted ids become extra subject tokens)."""
        return f"{subjects.GOAL_PREFIX}.{self.id}"


class WorldstateConfig(BaseModel):
    """Poller settings beside the goals, so one file says what is checked and how often."""

    model_config = ConfigDict(extra="forbid")

    poll_interval_s: float = Field(default=15.0, gt=0)
    probe_timeout_s: float = Field(default=5.0, gt=0)
    search_timeout_s: float = Field(default=2.0, gt=0, description="a slower search counts as a failed search")
    heartbeat_max_age_s: float | None = Field(
        default=None, gt=0, description="a worker is dead after this long without a heartbeat; "
        "default 3 x worker.heartbeat_s")
    max_data_age_s: float = Field(default=60.0, gt=0, description="older domain data makes goals unknown")
    canary_group: str = "worldstate-canary"
    canary_flow_group: str = "worldstate-canary-flow"
    canary_keep: int = Field(default=50, ge=1, description="pipeline canaries kept before the flow group is wiped")
    goals: list[Goal] = Field(default_factory=list)

    @field_validator("canary_group", "canary_flow_group")
    @classmethod
    def _group(cls, v: str) -> str:
        try:
            return validate_group_id(v)
        except InvalidGroupId as exc:
            raise ValueError(str(exc)) from exc

    @model_validator(mode="after")
    def _unique_ids(self) -> "WorldstateConfig":
        seen: set[str] = set()
        for g in self.goals:
            if g.id in seen:
                raise ValueError(f"goal id {g.id!r} is defined twice")
            seen.add(g.id)
        if self.canary_group == self.canary_flow_group:
            raise ValueError("canary_group and canary_flow_group must differ")
        return self

    def heartbeat_max_age(self, heartbeat_s: float) -> float:
        return self.heartbeat_max_age_s if self.heartbeat_max_age_s is not None else 3 * heartbeat_s


def goals_file() -> Path:
    return Path(os.environ.get(GOALS_FILE_ENV, DEFAULT_GOALS_FILE))


def _where(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    """'goal <id>: field <name>' for an error inside a goal, 'field <name>' otherwise."""
    if len(loc) >= 2 and loc[0] == "goals" and isinstance(loc[1], int):
        goals = raw.get("goals") or []
        item = goals[loc[1]] if loc[1] < len(goals) else None
        gid = item.get("id") if isinstance(item, dict) else None
        who = f"goal {gid!r}" if gid else f"goal #{loc[1] + 1} (no id)"
        field = ".".join(str(p) for p in loc[2:]) or "(goal)"
        return f"{who}: field '{field}'"
    return f"field '{'.'.join(str(p) for p in loc) or '(top level)'}'"


def parse_config(raw: Any, source: str) -> WorldstateConfig:
    """Validate already-loaded YAML; `source` names the file in every error."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(raw).__name__}")
    try:
        return WorldstateConfig.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            got = err.get("input")
            shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
            msg = str(err["msg"]).removeprefix("Value error, ")
            lines.append(f"{source}: {_where(tuple(err['loc']), raw)}: {msg}{shown}")
        raise ConfigError("invalid goals:\n  " + "\n  ".join(lines)) from exc


def load_config(path: Path | str | None = None) -> WorldstateConfig:
    """Read and validate a goals file; a missing or broken file is a ConfigError, never an empty goal list."""
    file = Path(path) if path is not None else goals_file()
    if not file.exists():
        raise ConfigError(f"{file}: goals file not found")
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {exc}") from exc
    return parse_config(raw, str(file))
