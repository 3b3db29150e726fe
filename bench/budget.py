"""The request path's budgets: each figure of the last `make bench` beside its budget, failing when one is over.

Run: `.venv/bin/python bench/budget.py` (the last step of `make bench`), or with `--results DIR` and
`--budgets FILE` on other files. Budgets live in bench/budget.json, set from measured figures
(docs/performance.md says when and how); a figure more than `tolerance` (15%) worse than its budget
fails the run, so a change that costs the request path says so in its own run, not a round later.
A figure whose bench did not run (or did not measure it, as QUICK=1 leaves out the 100k size), or measured
it on less data than its budget was set on (`measured_at`: QUICK=1 fills 1k facts a group, not 10k), is
listed as not measured and does not fail; `--strict` fails it too. A budget's `target`, when it has one, is
the bar the issue set: printed beside it, never failing a run.

A budget with a `gauge` (a figure of the same run that no mnemobus code moves, such as bench-pipeline's bare
nats-py relay) and `per_gauge` is a multiple of that gauge: this machine ran one tree twice as slow on one day
as on another, so a budget in milliseconds failed every figure on a slow spell and let a regression through on
a fast one. Across spells 1.4x apart, and the other host's, the plugin's CPU over the gauge's held within ~5%
(docs/performance.md); latency does not track it. Without its gauge in the results, such a budget falls back to `budget` (the
milliseconds of the machine it was set on), or is not measured when it has none.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).parent
BUDGETS = HERE / "budget.json"
RESULTS = HERE / "results"


@dataclass(frozen=True)
class Verdict:
    name: str
    figure: str  # "<bench>.<figure>" it was read from
    budget: float
    limit: float  # the budget with the tolerance: past this, the run fails
    value: float | None  # None: not measured in these results
    better: Literal["lower", "higher"]
    unit: str
    target: float | None = None
    unmeasured_why: str = ""  # why a value is None
    scaled: str = ""  # how the budget was scaled by the run's gauge ("9 x 1.046"), or "" when it was not

    @property
    def measured(self) -> bool:
        return self.value is not None

    @property
    def over(self) -> bool:
        if self.value is None:
            return False
        return self.value > self.limit if self.better == "lower" else self.value < self.limit

    @property
    def share_of_budget(self) -> float | None:
        return None if self.value is None or self.budget == 0 else self.value / self.budget


def limit_of(budget: float, tolerance: float, better: str) -> float:
    """Over by more than the tolerance: above budget x (1 + t) for a cost, below budget x (1 - t) for a rate."""
    return budget * (1 + tolerance) if better == "lower" else budget * (1 - tolerance)


def judge(budgets: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]]) -> list[Verdict]:
    """Every budget against the figure it names; `results` maps a bench's name to its results file's figures."""
    tolerance = float(budgets["tolerance"])
    out = []
    for name, spec in budgets["budgets"].items():
        bench, _, figure = spec["figure"].partition(".")
        better = spec.get("better", "lower")
        if better not in ("lower", "higher"):
            raise ValueError(f"budget {name!r}: 'better' must be 'lower' or 'higher', not {better!r}")
        figures = results.get(bench, {})
        value, why = _number(figures.get(figure)), ""
        if value is None:
            why = f"no {figure} in {bench}.json" if figures else f"no results of {bench}"
        for needed, least in spec.get("measured_at", {}).items():
            have = _number(figures.get(needed))
            if value is not None and (have is None or have < least):
                value, why = None, f"measured at {needed}={have}, budget set at >= {least}"
        budget, scaled = _scaled_budget(name, spec, results, better)
        if budget is None:
            value, why, budget = None, why or scaled, float("nan")
            scaled = ""
        target = spec.get("target")
        out.append(Verdict(name, spec["figure"], budget, limit_of(budget, tolerance, better), value, better,
                           spec.get("unit", ""), None if target is None else float(target), why, scaled))
    return out


def _scaled_budget(name: str, spec: Mapping[str, Any], results: Mapping[str, Mapping[str, Any]],
                   better: str) -> tuple[float | None, str]:
    """The budget for this run, and how it was scaled: `per_gauge` times the run's gauge (divided, for a rate,
    which falls as the machine slows), else the fixed `budget`; None (and why) when neither applies."""
    fixed = _number(spec.get("budget"))
    if "per_gauge" not in spec:
        if fixed is None:
            raise ValueError(f"budget {name!r}: needs 'budget' or 'gauge' and 'per_gauge'")
        return fixed, ""
    if "gauge" not in spec:
        raise ValueError(f"budget {name!r}: 'per_gauge' needs a 'gauge' figure")
    bench, _, figure = str(spec["gauge"]).partition(".")
    gauge = _number(results.get(bench, {}).get(figure))
    if gauge is None or gauge <= 0:
        if fixed is None:
            return None, f"no gauge {spec['gauge']} in these results"
        return fixed, ""
    per = float(spec["per_gauge"])
    budget = per * gauge if better == "lower" else per / gauge
    return budget, f"{per:g} {'x' if better == 'lower' else '/'} {gauge:g}"


def _number(raw: object) -> float | None:
    return float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else None


def load_results(directory: Path, benches: set[str]) -> dict[str, dict[str, Any]]:
    found = {}
    for bench in benches:
        path = directory / f"{bench}.json"
        if path.exists():
            found[bench] = json.loads(path.read_text())
    return found


def table(verdicts: list[Verdict], tolerance: float) -> str:
    width = max(len(v.name) for v in verdicts)
    lines = [f"{'budget':<{width}}  {'measured':>10}  {'budget':>10}  {'fails past':>10}  {'target':>8}  verdict",
             "-" * (width + 60)]
    for v in verdicts:
        shown = "-" if v.value is None else f"{v.value:,.2f}"
        target = "-" if v.target is None else f"{v.target:,.1f}"
        verdict = (f"not measured ({v.unmeasured_why})" if not v.measured else
                   f"OVER ({v.share_of_budget:.0%} of budget)" if v.over else f"ok ({v.share_of_budget:.0%})")
        scaled = f"; budget = {v.scaled}, the run's gauge" if v.scaled else ""
        budget, limit = ("-", "-") if v.budget != v.budget else (f"{v.budget:,.2f}", f"{v.limit:,.2f}")  # nan: none
        lines.append(f"{v.name:<{width}}  {shown:>10}  {budget:>10}  {limit:>10}  {target:>8}  {verdict}"
                     f"  [{v.unit}, {v.better} is better; {v.figure}{scaled}]")
    lines.append(f"a figure fails when it is more than {tolerance:.0%} worse than its budget (bench/budget.json)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", type=Path, default=BUDGETS)
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--strict", action="store_true", help="a budget with no measured figure fails too")
    args = ap.parse_args(argv)
    budgets = json.loads(args.budgets.read_text())
    benches = {str(spec[key]).partition(".")[0] for spec in budgets["budgets"].values()
               for key in ("figure", "gauge") if key in spec}
    results = load_results(args.results, benches)
    verdicts = judge(budgets, results)
    print(table(verdicts, float(budgets["tolerance"])))
    for bench, figures in sorted(results.items()):  # latency budgets mean little on a loaded machine: say the load
        print(f"{bench}: {figures.get('machine', 'machine not recorded')}")
    over = [v.name for v in verdicts if v.over]
    missing = [v.name for v in verdicts if not v.measured]
    if over:
        print(f"over budget: {', '.join(over)}", file=sys.stderr)
    if missing and args.strict:
        print(f"not measured: {', '.join(missing)}", file=sys.stderr)
    return 1 if over or (missing and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
