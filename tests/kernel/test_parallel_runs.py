"""How `make test` spreads tests over pytest-xdist workers (mnemobus/kernel/testing.py), shown on a small suite of
its own run the way `make test` runs ours: a file's tests run in order on one worker, a file with a `slow` test is
handed out first, one with an `exclusive` test after those without and one whose tests are all `exclusive` last,
and an `exclusive` test runs while no other test of the run does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnemobus.kernel.testing import inner_pytest_env

RECORD = '''
import json, os, time
from pathlib import Path

import pytest

def record(name, hold_s=0.0):
    start = time.time()
    time.sleep(hold_s)  # holds its place in the run long enough for a test beside it to overlap
    with open(os.environ["RUN_LOG"], "a") as f:
        f.write(json.dumps({"test": name, "worker": os.environ["PYTEST_XDIST_WORKER"], "start": start,
                            "end": time.time()}) + "\\n")
'''


SUITE = {
    # three files of six tests: each file's tests on one worker, in their written order; x's worker is free first and
    # takes the exclusive test while y's and z's still run
    **{f"test_{f}.py": "".join(f"def test_{f}{i}():\n    record('{f}{i}', {hold})\n" for i in range(6))
       for f, hold in (("x", 0.05), ("y", 0.25), ("z", 0.3))},
    "test_alone.py": "def test_first():\n    record('first', 0.05)\n"
                     "@pytest.mark.exclusive\ndef test_alone():\n    record('alone', 0.5)\n",
    # the most tests, one of them exclusive: handed out after the files with none (by size it would come first)
    "test_big_alone.py": "".join(f"def test_b{i}():\n    record('b{i}', 0.02)\n" for i in range(7))
                         + "@pytest.mark.exclusive\ndef test_b7():\n    record('b7', 0.05)\n",
    # first in collection order, every test exclusive: handed out last
    "test_all_alone.py": "@pytest.mark.exclusive\ndef test_late():\n    record('late', 0.05)\n",
    # last in collection order, one test: handed out last but for its mark
    "test_zslow.py": "@pytest.mark.slow\ndef test_slow():\n    record('slow', 0.1)\n",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """The small suite, run once the way `make test` runs ours; what each of its tests recorded."""
    tmp = tmp_path_factory.mktemp("parallel")
    suite = tmp / "suite"
    suite.mkdir()
    (suite / "record.py").write_text(RECORD)
    for name, body in SUITE.items():
        (suite / name).write_text("import pytest\nfrom record import record\n" + body)
    log = tmp / "run.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "mnemobus.kernel.testing", "-p", "no:cacheprovider",
                           "-p", "xdist.plugin", "-n", "3", "--dist", "loadfile", "--no-loadscope-reorder", "--rootdir", str(suite), str(suite)],
                          cwd=suite, env={**inner_pytest_env(), "RUN_LOG": str(log)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return Run([json.loads(line) for line in log.read_text().splitlines()], done.stdout)


class Run(list[dict[str, object]]):
    """What each test of the small suite recorded, and what the run printed."""

    def __init__(self, records: list[dict[str, object]], stdout: str) -> None:
        super().__init__(records)
        self.stdout = stdout


def test_the_tests_of_one_file_run_in_order_on_one_worker(run: list[dict[str, object]]) -> None:
    assert len(run) == 30
    for f in "xyz":
        mine = [r for r in run if str(r["test"]).startswith(f)]
        assert len({r["worker"] for r in mine}) == 1
        assert [r["test"] for r in sorted(mine, key=lambda r: float(r["start"]))] == [f"{f}{i}" for i in range(6)]


def test_an_exclusive_test_runs_while_no_other_test_does(run: list[dict[str, object]]) -> None:
    span = next(r for r in run if r["test"] == "alone")
    others = [r for r in run if str(r["test"])[0] in "xyz"]
    assert [r["test"] for r in others if r["start"] < span["end"] and r["end"] > span["start"]] == []
    # the other files' tests did run at the same time as each other: the run was parallel
    assert any(a["worker"] != b["worker"] and a["start"] < b["end"] and a["end"] > b["start"]
               for a in others for b in others)


def test_a_file_with_a_slow_test_is_handed_out_first(run: list[dict[str, object]]) -> None:
    slow = next(r for r in run if r["test"] == "slow")
    assert [r["test"] for r in run if r["worker"] == slow["worker"] and r["start"] < slow["start"]] == []


def test_a_nats_server_of_ones_own_is_refused_with_workers_naming_the_way_to_run_it(tmp_path: Path) -> None:
    """Every test deletes every stream of the server it is given: two workers on one server would break each other."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "mnemobus.kernel.testing", "-p", "no:cacheprovider",
                           "-p", "xdist.plugin", "-n", "2", "--nats-url=nats://127.0.0.1:4222", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=inner_pytest_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--nats-url runs the tests one at a time" in done.stderr and "TEST_WORKERS=0" in done.stderr


def test_a_file_whose_tests_are_all_exclusive_is_handed_out_last(run: list[dict[str, object]]) -> None:
    late = next(r for r in run if r["test"] == "late")
    # every other file had started (its tests go on on their workers meanwhile, waiting for the exclusive one)
    firsts = ("x0", "y0", "z0", "first", "slow")
    assert [r["test"] for r in run if r["test"] in firsts and r["start"] > late["start"]] == []


def test_a_file_with_an_exclusive_test_is_handed_out_after_the_files_without_one(
        run: list[dict[str, object]]) -> None:
    b0 = next(r for r in run if r["test"] == "b0")
    assert [r["test"] for r in run if r["test"] in ("x0", "y0", "z0", "slow") and r["start"] > b0["start"]] == []


def test_the_run_sums_up_the_time_tests_waited_for_an_exclusive_one(run: Run) -> None:
    """A setup of tens of seconds in a durations table is, more often than not, this wait: the summary tells them
    apart. Here y's and z's tests wait while `alone` (0.5 s) holds the run."""
    section = run.stdout.split("waiting for the run's turn (exclusive tests)", 1)
    assert len(section) == 2, run.stdout[-2000:]
    lines = section[1].splitlines()
    total = float(lines[1].split(" s in all")[0])
    assert total >= 0.1 and "s  test_" in lines[2], section[1][:1000]
