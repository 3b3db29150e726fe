"""The opt-in cost recorder (mnemobus/kernel/testing_costs.py): each file's CPU and wall time, per phase, summed
from every worker, with the CPU of the processes a test starts counted as the test's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mnemobus.kernel.testing import inner_pytest_env

BURN = """
import subprocess, sys, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_burns_in_its_call():
    burn(0.4)

def test_waits_on_a_child_that_burns():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.4\\n"
                    "while time.process_time() < end: pass"], check=True)
"""

WAIT = """
import threading

def test_waits_without_burning():
    threading.Event().wait(0.4)
"""

def run_costs(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "test_wait.py").write_text(WAIT)
    out = tmp_path / "costs.json"
    env = {**inner_pytest_env(), "MNEMOBUS_TEST_COSTS": str(out)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "mnemobus.kernel.testing_costs", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "base"), *args, str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(out.read_text())


@pytest.mark.parametrize("workers", [[], ["-p", "xdist.plugin", "-n", "2"]], ids=["alone", "two-workers"])
def test_each_files_cpu_counts_its_own_work_and_its_childrens_but_not_its_waits(tmp_path: Path,
                                                                                  workers: list[str]) -> None:
    done, costs = run_costs(tmp_path, *workers)
    burn, wait = costs["files"]["test_burn.py"], costs["files"]["test_wait.py"]
    assert burn["tests"] == 2 and wait["tests"] == 1
    assert burn["cpu_call"] >= 0.8  # 0.4 s in the test's own process, 0.4 s in the child it waited for
    assert wait["wall_call"] >= 0.4
    assert wait["cpu_call"] < 0.2  # waiting is wall time, not CPU
    assert burn["cpu"] == pytest.approx(burn["cpu_setup"] + burn["cpu_call"] + burn["cpu_teardown"], abs=0.02)
    assert costs["outside_tests_cpu_s"]  # each worker's start and collection, apart from the tests
    # the table lists the file that cost the most CPU first
    table = done.stdout.split("files by CPU", 1)[1].splitlines()
    assert "test_burn.py" in table[2] and "test_wait.py" in table[3]


def test_without_the_variable_nothing_is_recorded(tmp_path: Path) -> None:
    (tmp_path / "test_wait.py").write_text(WAIT)
    env = {k: v for k, v in inner_pytest_env().items() if k != "MNEMOBUS_TEST_COSTS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "mnemobus.kernel.testing_costs", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "--basetemp", str(tmp_path / "base"), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "files by CPU" not in done.stdout


def test_the_shared_neo4j_is_found_where_its_keeper_writes_it() -> None:
    from mnemobus.kernel.neo4j_shared import STATE
    from mnemobus.kernel.testing_costs import NEO4J_STATE

    assert NEO4J_STATE == STATE
