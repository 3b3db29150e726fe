"""Shared bench helpers: machine description, peak RSS, percentiles, result files, tables."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mnemobus.shared.proccpu import cpu_seconds  # noqa: F401 - the benchmarks import it from here

#: committed: the source of every figure the README and bench/report.md quote (a full run writes here)
RESULTS = Path(__file__).parent / "results"
#: ignored: a QUICK=1 run's figures are not the ones quoted, so they never replace a full run's
QUICK_RESULTS = RESULTS / "quick"
#: ignored: large raw outputs (corpora, per-query lists) that a result file only summarises
RAW = RESULTS / "raw"


def quick() -> bool:
    """QUICK=1 runs a small version of every bench (CI, smoke checks)."""
    return os.environ.get("QUICK", "") not in ("", "0", "false", "no")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    load = ", load %.2f" % os.getloadavg()[0] if hasattr(os, "getloadavg") else ""
    return f"{cpu}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}, Python {platform.python_version()}{load}"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def percentile(samples: Sequence[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summary_ms(samples_s: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {"p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3),
            "mean_ms": round(statistics.fmean(ms), 3) if ms else float("nan")}


def write_results(bench: str, figures: Mapping[str, Any], baseline: str, *, merge: bool = False) -> Path:
    """bench/results/<bench>.json: a flat object of named figures plus `machine` and `baseline`.

    A QUICK=1 run writes bench/results/quick/<bench>.json instead (git-ignored), so a small run never
    replaces the committed figures. merge=True keeps the figures of an earlier run that this run did not
    measure (a partial re-run).
    """
    path = result_path(bench)
    path.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(path.read_text()) if merge and path.exists() else {}
    where = machine()
    path.write_text(json.dumps({**earlier, **figures, "machine": where, "baseline": baseline}, indent=2,
                               sort_keys=True) + "\n")
    print(f"machine: {where}\nbaseline: {baseline}\nwritten to {path}")
    return path


def result_path(bench: str) -> Path:
    """Where this run's figures for `bench` go (and where a partial re-run finds the earlier ones)."""
    return (QUICK_RESULTS if quick() else RESULTS) / f"{bench}.json"


def print_table(title: str, figures: Mapping[str, Any]) -> None:
    """Scalars in a table; long notes printed beneath it; nested objects (printed by their bench) left out."""
    notes = {k: v for k, v in figures.items() if isinstance(v, str) and len(v) > 60}
    figures = {k: v for k, v in figures.items() if k not in notes and not isinstance(v, (dict, list))}
    width = max((len(k) for k in figures), default=10)
    print(f"\n{title}\n" + "-" * (width + 20))
    for key, value in figures.items():
        shown = f"{value:,.3f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown:>16}")
    for key, value in notes.items():
        print(f"{key}: {value}")
