"""World-state series, registered into the registry the process already exports.

One pair of series per goal says what was judged and whether it could be
judged: `mnemobus_goal_satisfied` is 1 only when the goal held on fresh data
(0 when violated *or* unknown, so a naive `== 0` alert can never be silenced
by a dead probe) and `mnemobus_goal_known` is 0 when the goal could not be
judged. Probe latency and failures say which probe to look at. No label
carries a user or group id.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from worldstate.evaluate import GoalResult, Transition
from worldstate.goals import Goal

_PROBE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class WorldstateMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.goal_satisfied = Gauge(
            "mnemobus_goal_satisfied", "1 when the goal held on fresh data at the last poll; 0 when violated or unknown",
            ["goal", "severity"], registry=r)
        self.goal_known = Gauge(
            "mnemobus_goal_known", "1 when the goal could be judged on fresh, available data; 0 when unknown",
            ["goal", "severity"], registry=r)
        self.goal_value = Gauge(
            "mnemobus_goal_observed_value", "The value the goal's selector read (booleans as 1/0; absent when unknown)",
            ["goal", "severity"], registry=r)
        self.goal_for = Gauge(
            "mnemobus_goal_for_seconds", "How long a violation must last before the goal fires", ["goal", "severity"],
            registry=r)
        self.goal_transitions = Counter(
            "mnemobus_goal_transitions_total", "Announced goal state changes (to: ok, violated, unknown)",
            ["goal", "severity", "to"], registry=r)
        self.probe_seconds = Histogram(
            "mnemobus_worldstate_probe_duration_seconds", "Time each probe took", ["domain", "probe"],
            buckets=_PROBE_BUCKETS, registry=r)
        self.probe_failures = Counter(
            "mnemobus_worldstate_probe_failures_total", "Probes that raised or timed out (reason: timeout, error)",
            ["domain", "probe", "reason"], registry=r)
        self.domain_available = Gauge(
            "mnemobus_worldstate_domain_available", "1 when every probe of the domain answered at the last poll",
            ["domain"], registry=r)
        self.polls = Counter("mnemobus_worldstate_polls_total", "Completed polls", registry=r)
        self.last_poll = Gauge(
            "mnemobus_worldstate_last_poll_timestamp_seconds", "Unix time of the last completed poll", registry=r)

    def declare(self, goals: list[Goal]) -> None:
        """Every goal has series from the start (unknown until judged), so `absent()` never hides one."""
        for g in goals:
            self.goal_satisfied.labels(g.id, g.severity).set(0)
            self.goal_known.labels(g.id, g.severity).set(0)
            self.goal_for.labels(g.id, g.severity).set(g.for_s)
            for to in ("ok", "violated", "unknown"):
                self.goal_transitions.labels(g.id, g.severity, to)

    def record(self, results: list[GoalResult], transitions: list[Transition]) -> None:
        for r in results:
            labels = (r.goal.id, r.goal.severity)
            self.goal_satisfied.labels(*labels).set(1 if r.satisfied else 0)
            self.goal_known.labels(*labels).set(1 if r.known else 0)
            if r.known and isinstance(r.value, (bool, int, float)):
                self.goal_value.labels(*labels).set(float(r.value))
            else:
                try:
                    self.goal_value.remove(*labels)
                except KeyError:
                    pass
        for t in transitions:
            self.goal_transitions.labels(t.goal.id, t.goal.severity, t.state).inc()
