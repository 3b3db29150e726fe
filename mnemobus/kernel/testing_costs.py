"""pytest plugin, opt-in: where a run's CPU and wall time go, per test file and phase.

Why: `--durations` gives wall time only, and on two shared cores a test that waits (a nats-server, a poll) and a test
that burns a core look alike. The 8-minute bar of `make test` is CPU-bound (issue 38), so a cut starts from the
files that cost the most CPU. Set `MNEMOBUS_TEST_COSTS=1` (or a path ending in `.json` to also keep the records):

    MNEMOBUS_TEST_COSTS=1 .venv/bin/python -m pytest -q -n 2 tests/store

A test's CPU is its worker process's (`getrusage` self and reaped children) plus what the worker's live descendant
processes used meanwhile (a nats-server, a subprocess, a JVM of the test's own), read from /proc at each phase's
start and end. The run's shared Neo4j (kernel/neo4j_shared.py: a keeper started by whichever worker came first) is
not counted as that worker's: its CPU during each phase is a column of its own, which overlaps between tests running
at the same time on other workers, so it is a hint of which files make it work, not a share. A worker's CPU outside
every test phase (start, imports, collection) is summed per worker.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ENV = "MNEMOBUS_TEST_COSTS"
PHASES = ("setup", "call", "teardown")
_KEY = "phase_cost"  # user property: (wall_s, cpu_s, neo4j_cpu_s) of the report's phase
_WORKER_KEY = "test_costs_outside"  # workeroutput: CPU of the worker outside test phases
_NEO4J_KEY = "test_costs_neo4j"  # workeroutput: the shared Neo4j's whole CPU when the worker ended
_TICK = os.sysconf("SC_CLK_TCK")
#: the shared Neo4j's address and keeper (mnemobus.kernel.neo4j_shared.STATE, which a test holds equal)
NEO4J_STATE = "neo4j.json"
#: how many files the end-of-run table lists
TOP = 25


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of the process and its reaped children) for every process we can read."""
    table: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        table[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK)
    return table


def _tree(table: dict[int, tuple[int, float]], root: int) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _) in table.items():
        children[ppid].append(pid)
    seen, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, ()))
    return seen


def _shared_neo4j_keeper(run_dir: Path) -> int | None:
    try:
        return int(json.loads((run_dir / NEO4J_STATE).read_text())["keeper"])
    except (OSError, ValueError, KeyError):
        return None


class CostRecorder:
    """Samples this process's CPU (and its descendants', the shared Neo4j apart) around every test phase."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.in_tests = 0.0
        self._run_dir: Path | None = None

    def run_dir(self) -> Path:
        if self._run_dir is None:  # the tmp path factory exists once pytest's own configure ran
            base = self.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
            # the folder every worker of the run shares, as mnemobus.kernel.testing.run_dir says (not imported:
            # this plugin stays cheap to load)
            self._run_dir = base.parent if hasattr(self.config, "workerinput") else base
        return self._run_dir

    def sample(self) -> tuple[float, float, float]:
        """(monotonic seconds, CPU of this process and its descendants but the shared Neo4j, the shared Neo4j's)."""
        own = resource.getrusage(resource.RUSAGE_SELF)
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
        table = _proc_table()
        keeper = _shared_neo4j_keeper(self.run_dir())
        neo4j = _tree(table, keeper) if keeper in table else set()
        mine = _tree(table, os.getpid()) - {os.getpid()}
        # live descendants: their CPU is not in RUSAGE_CHILDREN until they are reaped; when one is reaped during a
        # phase its total moves from here to there, so the phase's difference stays right
        cpu += sum(table[p][1] for p in mine - neo4j)
        return time.monotonic(), cpu, sum(table[p][1] for p in neo4j)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self._measure(item, "setup")

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        yield from self._measure(item, "call")

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        yield from self._measure(item, "teardown")

    def _measure(self, item: pytest.Item, phase: str) -> Iterator[None]:
        w0, c0, n0 = self.sample()
        yield
        w1, c1, n1 = self.sample()
        self.in_tests += c1 - c0
        # the report of this phase copies the item's properties when it is made, right after this hook
        item.user_properties.append((f"{_KEY}_{phase}", (round(w1 - w0, 4), round(c1 - c0, 4), round(n1 - n0, 4))))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is None:
            return
        _, cpu, neo4j = self.sample()
        workeroutput[_WORKER_KEY] = round(cpu - self.in_tests, 2)
        workeroutput[_NEO4J_KEY] = round(neo4j, 2)


class CostReport:
    """On the controller (or pytest alone): sums the phases per file and prints the files that cost the most CPU."""

    def __init__(self, out: Path | None, recorder: CostRecorder | None) -> None:
        self.out = out
        self.recorder = recorder
        self.files: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.outside: dict[str, float] = {}
        self.neo4j_total = 0.0  # the shared Neo4j's CPU since its start, read when the last worker ended

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        cost = dict(report.user_properties).get(f"{_KEY}_{report.when}")
        if cost is None:
            return
        wall, cpu, neo4j = cost
        row = self.files[report.nodeid.split("::", 1)[0]]
        row[f"wall_{report.when}"] += wall
        row[f"cpu_{report.when}"] += cpu
        row["neo4j_cpu"] += neo4j
        if report.when == "call":
            row["tests"] += 1

    @pytest.hookimpl(optionalhook=True)  # an xdist hook
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        outside = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
        if outside is not None:
            self.outside[node.gateway.id] = outside
        self.neo4j_total = max(self.neo4j_total, getattr(node, "workeroutput", {}).get(_NEO4J_KEY, 0.0))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.recorder is not None and not self.outside:  # pytest alone: this process is the one worker
            _, cpu, neo4j = self.recorder.sample()
            self.outside["main"] = round(cpu - self.recorder.in_tests, 2)
            self.neo4j_total = neo4j
        rows = {f: {k: round(v, 2) for k, v in r.items()} for f, r in self.files.items()}
        for r in rows.values():
            r["cpu"] = round(sum(r.get(f"cpu_{p}", 0.0) for p in PHASES), 2)
            r["wall"] = round(sum(r.get(f"wall_{p}", 0.0) for p in PHASES), 2)
        order = sorted(rows, key=lambda f: -rows[f]["cpu"])
        tr = terminalreporter
        tr.section(f"test costs ({ENV}): files by CPU")
        tr.write_line(f"{'CPU s':>8} {'wall s':>8} {'setup':>13} {'call':>13} {'teardown':>13} {'neo4j':>7} "
                      f"{'tests':>5}  file   (phases: CPU/wall s; neo4j: the shared server's CPU meanwhile)")
        for f in order[:TOP]:
            r = rows[f]
            phases = " ".join(f"{r.get(f'cpu_{p}', 0):6.1f}/{r.get(f'wall_{p}', 0):<6.1f}" for p in PHASES)
            tr.write_line(f"{r['cpu']:8.1f} {r['wall']:8.1f} {phases} {r.get('neo4j_cpu', 0):7.1f} "
                          f"{int(r.get('tests', 0)):5d}  {f}")
        total = sum(r["cpu"] for r in rows.values())
        tr.write_line(f"{total:8.1f} s CPU in {len(rows)} files' test phases; outside them (start, imports, "
                      f"collection) per worker: " + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(self.outside.items())))
        tr.write_line(f"{self.neo4j_total:8.1f} s CPU of the run's shared Neo4j from its start (the JVM's start too)")
        if self.out is not None:
            self.out.write_text(json.dumps({"files": rows, "outside_tests_cpu_s": self.outside,
                                            "shared_neo4j_cpu_s": self.neo4j_total}, indent=1,
                                           sort_keys=True))
            tr.write_line(f"records: {self.out}")


def pytest_configure(config: pytest.Config) -> None:
    """The recorder on each worker (or pytest alone), the report on the controller; nothing unless asked."""
    setting = os.environ.get(ENV, "")
    if not setting or setting == "0":
        return
    worker = hasattr(config, "workerinput")
    controller = not worker and getattr(config.option, "numprocesses", None)
    recorder = None
    if not controller:
        recorder = CostRecorder(config)
        config.pluginmanager.register(recorder, "mnemobus-test-costs-recorder")
    if not worker:
        out = Path(setting) if setting.endswith(".json") else None
        config.pluginmanager.register(CostReport(out, recorder), "mnemobus-test-costs-report")
