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


def _gauged(tmp_path: Path, figure: float, gauge: float | None, better: str = "lower",
            **spec: float) -> dict[str, object]:
    """One budget of `per_gauge` (and whatever else `spec` gives) judged on a run whose gauge read `gauge`."""
    budgets = {"tolerance": 0.15, "budgets": {"b": {"figure": "bench_run.cost", "gauge": "bench_run.floor_ms",
                                                    "better": better, **spec}}}
    run = {"cost": figure, **({} if gauge is None else {"floor_ms": gauge})}
    (tmp_path / "bench_run.json").write_text(json.dumps(run))
    (v,) = judge(budgets, load_results(tmp_path, {"bench_run"}))
    return {"over": v.over, "measured": v.measured, "budget": v.budget, "scaled": v.scaled, "why": v.unmeasured_why}


def test_a_budget_per_gauge_is_that_many_of_the_runs_gauge(tmp_path: Path) -> None:
    on_a_slow_day = _gauged(tmp_path, figure=9.0, gauge=1.1, per_gauge=8.0)  # budget 8.8
    assert on_a_slow_day["budget"] == pytest.approx(8.8) and not on_a_slow_day["over"]
    assert on_a_slow_day["scaled"] == "8 x 1.1"
    on_a_fast_day = _gauged(tmp_path, figure=9.0, gauge=0.6, per_gauge=8.0)  # the same cost is 1.9 gauges over
    assert on_a_fast_day["budget"] == pytest.approx(4.8) and on_a_fast_day["over"]


def test_a_rate_budget_per_gauge_falls_as_the_machine_slows(tmp_path: Path) -> None:
    assert _gauged(tmp_path, figure=250, gauge=1.0, better="higher", per_gauge=300)["over"]  # 17% under 300
    slow = _gauged(tmp_path, figure=250, gauge=1.2, better="higher", per_gauge=300)  # 250 is this machine's 300
    assert slow["budget"] == pytest.approx(250) and not slow["over"]


def test_a_gauged_budget_without_its_gauge_falls_back_to_its_fixed_budget(tmp_path: Path) -> None:
    fell_back = _gauged(tmp_path, figure=9.0, gauge=None, per_gauge=8.0, budget=5.0)
    assert fell_back["budget"] == 5.0 and fell_back["scaled"] == "" and fell_back["over"]


def test_a_gauged_budget_with_neither_its_gauge_nor_a_fixed_budget_is_not_measured(tmp_path: Path) -> None:
    alone = _gauged(tmp_path, figure=90.0, gauge=None, per_gauge=8.0)
    assert not alone["measured"] and not alone["over"]
    assert "no gauge bench_run.floor_ms" in str(alone["why"])


def test_the_committed_budgets_name_benches_that_exist() -> None:
    budgets = json.loads(BUDGETS.read_text())
    assert budgets["tolerance"] == 0.15
    for name, spec in budgets["budgets"].items():
        for key in ("figure", "gauge"):
            if key in spec:
                bench = spec[key].partition(".")[0]
                assert (RESULTS.parent / f"{bench}.py").exists(), f"{name}: no bench/{bench}.py writes {spec[key]}"
        value = spec.get("per_gauge", spec.get("budget", 0))
        assert value > 0 and spec.get("why"), f"{name}: a budget needs a value and the reason for it"
