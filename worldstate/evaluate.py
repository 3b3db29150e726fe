"""Observations x goals -> goal states, and goal states over time -> transitions. No I/O.

Evaluation only ever sees a whole snapshot (every domain, collected in one
poll), so a missing key means "not observed" and makes the goal unknown,
never satisfied. Data from an unavailable domain, or older than the allowed
age, is not trusted either. Transitions are computed here, once per goal and
state change, so a flapping probe or a repeated poll never re-announces an
unchanged state.
"""

from __future__ import annotations

import operator as op
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from worldstate.goals import Goal

State = Literal["ok", "violated", "unknown"]
#: what agents and dashboards see: `pending` while a violation has not yet lasted the goal's `for`
PublicState = Literal["ok", "pending", "violated", "unknown"]

_OPS = {"eq": op.eq, "ne": op.ne, "lt": op.lt, "le": op.le, "gt": op.gt, "ge": op.ge}
_MISSING = object()


@dataclass(frozen=True, slots=True)
class GoalResult:
    """One goal judged against one snapshot."""

    goal: Goal
    state: State
    value: Any = None
    reason: str = ""

    @property
    def satisfied(self) -> bool:
        return self.state == "ok"

    @property
    def known(self) -> bool:
        return self.state != "unknown"


def select(document: dict[str, Any], selector: str) -> Any:
    """Follow a dotted path through nested mappings; `_MISSING` when any step is absent."""
    node: Any = document
    for part in selector.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def _comparable(value: Any, goal: Goal) -> str | None:
    """Why value and threshold cannot be compared, or None when they can."""
    t = goal.threshold
    if isinstance(t, bool) or isinstance(value, bool):
        return None if isinstance(t, bool) and isinstance(value, bool) else "expected a boolean on both sides"
    if isinstance(t, (int, float)):
        return None if isinstance(value, (int, float)) else f"expected a number, got {type(value).__name__}"
    return None if isinstance(value, str) else f"expected a string, got {type(value).__name__}"


def evaluate_goal(goal: Goal, document: dict[str, Any], now: datetime, max_age_s: float) -> GoalResult:
    """Judge one goal; anything short of fresh, available, comparable data is `unknown`."""
    domain = select(document, f"domains.{goal.domain}")
    if domain is _MISSING or not isinstance(domain, dict):
        return GoalResult(goal, "unknown", reason=f"domain {goal.domain!r} was not polled")
    if domain.get("_available") is not True:
        problems = domain.get("errors") or {}
        detail = "; ".join(f"{k}: {v}" for k, v in sorted(problems.items())) or "no detail"
        return GoalResult(goal, "unknown", reason=f"domain {goal.domain!r} unavailable ({detail})")
    collected = _parse_time(domain.get("collectedAt"))
    if collected is None:
        return GoalResult(goal, "unknown", reason=f"domain {goal.domain!r} has no collectedAt")
    age = (now - collected).total_seconds()
    if age > max_age_s:
        return GoalResult(goal, "unknown", reason=f"domain {goal.domain!r} data is {age:.0f}s old (max {max_age_s:.0f}s)")
    value = select(document, goal.selector)
    if value is _MISSING or value is None:
        return GoalResult(goal, "unknown", reason=f"selector {goal.selector} matched nothing")
    mismatch = _comparable(value, goal)
    if mismatch:
        return GoalResult(goal, "unknown", value, reason=f"{goal.selector}={value!r}: {mismatch}")
    held = _OPS[goal.operator](value, goal.threshold)
    reason = f"{goal.selector}={value!r} {'' if held else 'not '}{goal.operator} {goal.threshold!r}"
    return GoalResult(goal, "ok" if held else "violated", value, reason)


def evaluate(goals: list[Goal], document: dict[str, Any], now: datetime, max_age_s: float) -> list[GoalResult]:
    return [evaluate_goal(g, document, now, max_age_s) for g in goals]


@dataclass(frozen=True, slots=True)
class Transition:
    """A goal's announced state changed; published on worldstate.goal.<id>."""

    goal: Goal
    previous: PublicState | None
    state: PublicState
    result: GoalResult
    at: datetime
    since: datetime

    def to_json(self) -> dict[str, Any]:
        g = self.goal
        return {
            "goal": g.id, "severity": g.severity, "description": g.description,
            "previous": self.previous, "state": self.state,
            "event": "resolved" if self.state == "ok" else "firing",
            "selector": g.selector, "operator": g.operator, "threshold": g.threshold,
            "value": self.result.value, "reason": self.result.reason,
            "since": self.since.isoformat(), "at": self.at.isoformat(),
        }


@dataclass
class _Track:
    announced: PublicState | None = None
    bad: State | None = None
    bad_since: datetime | None = None


@dataclass
class GoalTracker:
    """Applies each goal's `for` and announces only changes of the announced state.

    The first `ok` is not announced (nothing to react to); a non-ok state is
    announced once it has lasted `for`; `ok` after a non-ok is announced at once.
    """

    tracks: dict[str, _Track] = field(default_factory=dict)

    def update(self, results: list[GoalResult], now: datetime) -> list[Transition]:
        out: list[Transition] = []
        for r in results:
            t = self.tracks.setdefault(r.goal.id, _Track())
            if r.state == "ok":
                t.bad, t.bad_since = None, None
                if t.announced not in (None, "ok"):
                    out.append(Transition(r.goal, t.announced, "ok", r, now, now))
                t.announced = "ok"
                continue
            if t.bad != r.state:  # a new kind of trouble restarts the clock
                t.bad, t.bad_since = r.state, now
            assert t.bad_since is not None
            if (now - t.bad_since).total_seconds() >= r.goal.for_s and t.announced != r.state:
                out.append(Transition(r.goal, t.announced, r.state, r, now, t.bad_since))
                t.announced = r.state
        return out

    def public_state(self, result: GoalResult) -> PublicState:
        """`pending` while a fresh violation waits out its `for`; otherwise the judged state."""
        t = self.tracks.get(result.goal.id)
        if result.state != "ok" and t is not None and t.announced != result.state:
            return "pending"
        return result.state
