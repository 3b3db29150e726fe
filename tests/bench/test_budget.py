"""bench/budget.py, the gate at the end of `make bench`: each figure against its budget, on a results fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.budget import BUDGETS, RESULTS, judge, load_results, main

FIXTURE = Path(__file__).parent / "budget_fixture"


@pytest.fixture()
def verdicts():  # type: ignore[no-untyped-def]
    budgets = json.loads((FIXTURE / "budget.json").read_text())
    results = load_results(FIXTURE, {"bench_fake", "bench_other", "bench_absent"})
    return {v.name: v for v in judge(budgets, results)}


def test_a_cost_at_its_budget_passes(verdicts) -> None:  # type: ignore[no-untyped-def]
    assert verdicts["cpu_at_budget"].value == 3.0 and not verdicts["cpu_at_budget"].over


def test_a_cost_over_its_budget_by_less_than_the_tolerance_passes(verdicts) -> None:  # type: ignore[no-untyped-def]
    assert verdicts["latency_within_tolerance"].value == 11.4  # 14% over
    assert not verdicts["latency_within_tolerance"].over


def test_a_cost_over_its_budget_by_more_than_the_tolerance_fails(verdicts) -> None:  # type: ignore[no-untyped-def]
    assert verdicts["latency_over"].value == 2.31  # 15.5% over 2.0
    assert verdicts["latency_over"].over


def test_a_rate_under_its_budget_by_less_than_the_tolerance_passes(verdicts) -> None:  # type: ignore[no-untyped-def]
    assert not verdicts["rate_within_tolerance"].over  # 430 of 500: 14% under


def test_a_rate_under_its_budget_by_more_than_the_tolerance_fails(verdicts) -> None:  # type: ignore[no-untyped-def]
    assert verdicts["rate_under"].over  # 254.9 of 300: 15.03% under


def test_a_figure_no_bench_wrote_is_not_measured_and_not_over(verdicts) -> None:  # type: ignore[no-untyped-def]
    assert not verdicts["never_measured"].measured and not verdicts["never_measured"].over


def test_a_figure_measured_on_less_data_than_its_budget_was_set_on_is_not_compared(verdicts) -> None:  # type: ignore[no-untyped-def]
    v = verdicts["measured_on_less_data"]  # 3.0 ms against 1.0: over, were it measured at the budget's size
    assert not v.measured and not v.over
    assert "facts_per_group=1000.0" in v.unmeasured_why


def test_the_gate_exits_non_zero_naming_what_is_over(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--budgets", str(FIXTURE / "budget.json"), "--results", str(FIXTURE)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "over budget: latency_over, rate_under" in err
    assert "not measured" in out  # listed in the table, beside its budget


def test_the_gate_passes_when_every_measured_figure_is_within_tolerance(tmp_path: Path) -> None:
    for name in ("bench_fake.json", "bench_other.json"):
        shutil.copy(FIXTURE / name, tmp_path / name)
    fake = json.loads((tmp_path / "bench_fake.json").read_text())
    (tmp_path / "bench_fake.json").write_text(json.dumps({**fake, "p50_ms": 2.29}))
    other = json.loads((tmp_path / "bench_other.json").read_text())
    (tmp_path / "bench_other.json").write_text(json.dumps({**other, "requests_per_s": 256}))
    assert main(["--budgets", str(FIXTURE / "budget.json"), "--results", str(tmp_path)]) == 0


def test_strict_fails_a_budget_no_bench_measured(tmp_path: Path) -> None:
    budgets = {"tolerance": 0.15, "budgets": {"absent": {"figure": "bench_absent.x_ms", "budget": 1.0}}}
    (tmp_path / "budget.json").write_text(json.dumps(budgets))
    assert main(["--budgets", str(tmp_path / "budget.json"), "--results", str(tmp_path)]) == 0
    assert main(["--budgets", str(tmp_path / "budget.json"), "--results", str(tmp_path), "--strict"]) == 1


def test_the_committed_budgets_name_benches_that_exist() -> None:
    budgets = json.loads(BUDGETS.read_text())
    assert budgets["tolerance"] == 0.15
    for name, spec in budgets["budgets"].items():
        bench = spec["figure"].partition(".")[0]
        assert (RESULTS.parent / f"{bench}.py").exists(), f"{name}: no bench/{bench}.py writes {spec['figure']}"
        assert spec["budget"] > 0 and spec.get("why"), f"{name}: a budget needs a value and the reason for it"
