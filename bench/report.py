"""bench/report.md (+ bench/recall_latency.png) from bench/results/*.json: `make bench-report`, and `make bench`.

Reads the committed result files (not bench/results/quick/); nothing here holds a number. The markdown is a
function of those files alone (no clock, no installed packages), so tests/bench/test_results_are_the_source.py can
check that the committed report is the one they give. Stdlib only, plus matplotlib for the plot (installed in
bench/.venv-graphiti; without it the plot is skipped).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
REPORT = BENCH / "report.md"
PLOT = BENCH / "recall_latency.png"
CATS = ["multi-hop", "temporal", "open-domain", "single-hop", "adversarial", "overall"]


def size_of(label: str) -> int | None:
    """'2k' -> 2000, '100k' -> 100000, '1m_1000g' -> 1000000."""
    m = re.match(r"(\d+(?:\.\d+)?)([km])", label)
    if not m:
        return None
    return int(float(m.group(1)) * (1_000 if m.group(2) == "k" else 1_000_000))


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def load_results() -> dict[str, dict]:
    out = {}
    for path in sorted(RESULTS.glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"skipping {path}: {exc}", file=sys.stderr)
    return out


def locomo_section(r: dict) -> list[str]:
    lines = ["## Retrieval quality on LoCoMo (dev split, `bench/bench_locomo.py`)", "",
             f"Machine: {r.get('machine')}", "",
             f"{r.get('conversations')} conversations, {r.get('turns')} turns ingested as episodes, "
             f"{r.get('questions')} questions ({r.get('questions_skipped_no_evidence')} skipped: no evidence turn). "
             f"Engine ingest: {r.get('engine_ingest_s')} s, {r.get('engine_facts_total')} facts extracted "
             f"(offline extractor), load {r.get('load_during_ingest')}.", ""]
    counts = r.get("question_counts", {})
    table = r.get("recall", {})
    for k in (5, 10):
        lines += [f"### recall@{k}", "", "| system | " + " | ".join(CATS) + " | query p50 ms | load |",
                  "|---|" + "---:|" * (len(CATS) + 2),
                  "| *questions* | " + " | ".join(str(counts.get(c, "")) for c in CATS) + " | | |"]
        first = [n for n in ("bm25", "bm25_fts5_porter", "vector", "mnemobus_hybrid") if n in table]
        for name in first + [n for n in table if n not in first]:
            row = table[name]
            cells = [f"{row[f'{c}@{k}']:.3f}" if f"{c}@{k}" in row else "" for c in CATS]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {r.get(f'{name}_query_p50_ms', '')} | "
                         f"{r.get(f'{name}_load', '')} |")
        lines.append("")
    verdict = r.get("target_per_category", {})
    lines += [f"Target (mnemobus_hybrid recall@10 >= best baseline in every category, higher overall): "
              f"**{'met' if r.get('target_met') else 'NOT met'}** — "
              + ", ".join(f"{c}: {'yes' if ok else 'no'}" for c, ok in verdict.items()), ""]
    baselines = [n for n in table if not n.startswith("mnemobus")]
    base = {c: max((table[b].get(f"{c}@10", 0.0) for b in baselines), default=0.0) for c in CATS}
    lines += [f"Every mnemobus variant minus the best baseline ({', '.join(baselines)}) at recall@10, computed from the table above:", "",
              "| variant | " + " | ".join(CATS) + " | all targets |", "|---|" + "---|" * (len(CATS) + 1)]
    for name, row in table.items():
        if not name.startswith("mnemobus"):
            continue
        oks = [(row.get(f"{c}@10", 0.0) > base[c]) if c == "overall" else (row.get(f"{c}@10", 0.0) >= base[c]) for c in CATS]
        cells = [f"{row.get(f'{c}@10', 0.0) - base[c]:+.3f}" for c in CATS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'yes' if all(oks) else 'no'} |")
    lines.append("")
    diag = [(n, r.get(f"{n}_facts_per_question"), r.get(f"{n}_top10_slots_from_facts_only")) for n in table
            if f"{n}_facts_per_question" in r]
    if diag:
        lines += ["| variant | facts returned per question | top-10 slots taken by fact-only turns |", "|---|---:|---:|"]
        lines += [f"| {n} | {a} | {'' if b is None else b} |" for n, a, b in diag]
        lines.append("")
    return lines


def graphiti_section(r: dict) -> list[str]:
    lines = ["## Graphiti side by side (`bench/bench_graphiti.py`)", "", f"Machine: {r.get('machine')}", "",
             f"Baseline: {r.get('baseline')}. {r.get('queries')} queries, k = {r.get('k')}.", ""]
    labels = sorted({m.group(1) for key in r if (m := re.match(r"^(\d+[km])_facts$", key))}, key=lambda s: size_of(s) or 0)
    for label in labels:
        systems = sorted({m.group(1) for key in r if (m := re.match(rf"^{label}_(graphiti|mnemobus_\w+?)_p50_ms$", key))})
        lines += [f"### {label}: {r.get(f'{label}_facts')} facts, {r.get(f'{label}_entities')} entities, "
                  f"{r.get(f'{label}_groups')} group(s)", "",
                  "| system | p50 ms | p95 ms | p99 ms | recall@5 | recall@10 | load time s | load avg |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for s in systems:
            cells = [r.get(f"{label}_{s}_{x}", "") for x in ("p50_ms", "p95_ms", "p99_ms", "recall@5", "recall@10",
                                                             "load_s", "loadavg")]
            lines.append(f"| {s} | " + " | ".join(fmt(c) for c in cells) + " |")
        lines.append("")
        ratios = {key[len(label) + 1:]: v for key, v in r.items() if key.startswith(f"{label}_ratio_")}
        if ratios:
            lines += ["Ratios (Graphiti / mnemobus): " + ", ".join(f"{k.replace('ratio_', '')} = {v}" for k, v in ratios.items()), ""]
        for key in (f"{label}_graphiti_error", f"{label}_graphiti_first_error"):
            if key in r:
                lines += [f"Graphiti error: `{str(r[key])[-800:]}`", ""]
        extra = {k: r[k] for k in (f"{label}_graphiti_version", f"{label}_neo4j_rss_mb", f"{label}_graphiti_edges_in_neo4j",
                                   f"{label}_embed_corpus_s") if k in r}
        if extra:
            lines += [", ".join(f"{k[len(label) + 1:]}: {v}" for k, v in extra.items()), ""]
    return lines


def generic_section(name: str, r: dict) -> list[str]:
    lines = [f"## {name}", "", f"Machine: {r.get('machine')}", "", f"Baseline: {r.get('baseline', '')}", "",
             "| figure | value |", "|---|---:|"]
    flat = r.get("results") if isinstance(r.get("results"), dict) else None
    items = r.items() if flat is None else [(f"{b}.{k}", v) for b, row in flat.items() for k, v in row.items()]
    for key, value in items:
        if key in ("machine", "baseline") or isinstance(value, (dict, list)):
            continue
        lines.append(f"| {key} | {fmt(value)} |")
    return lines + [""]


def latency_series(results: dict[str, dict]) -> dict[str, list[tuple[int, float]]]:
    """(bench/system, quantile) -> [(facts, ms)] from every result file that has recall latencies by size."""
    series: dict[str, list[tuple[int, float]]] = {}
    for bench, r in results.items():
        if isinstance(r.get("results"), dict) and "facts" in r:  # bench_neo4j --json shape
            for backend, row in r["results"].items():
                for q in ("p50_ms", "p99_ms"):
                    if q in row:
                        series.setdefault(f"{bench} {backend} {q[:3]}", []).append((int(r["facts"]), float(row[q])))
            continue
        for key, value in r.items():
            m = (re.match(r"^(?:recall|search)_(\d+[km])(?:_\d+g)?(?:_(\w+?))?_(p50|p99)_ms$", key)
                 or re.match(r"^(\d+[km])_(graphiti|mnemobus_\w+?)_(p50|p99)_ms$", key))
            if m and isinstance(value, (int, float)) and size_of(m.group(1)):
                system = m.group(2) or "recall"
                series.setdefault(f"{bench} {system} {m.group(3)}", []).append((size_of(m.group(1)), float(value)))
    return {k: sorted(v) for k, v in series.items()}


def plot(series: dict[str, list[tuple[int, float]]]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot (make bench-report installs it in bench/.venv-graphiti)", file=sys.stderr)
        return False
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(11, 5.5))
    systems = sorted({name.rsplit(" ", 1)[0] for name in series})
    colours = plt.get_cmap("tab20")
    for name, points in sorted(series.items()):
        system, quantile = name.rsplit(" ", 1)
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o" if quantile == "p50" else "^", color=colours(systems.index(system) % 20),
                linestyle="--" if quantile == "p99" else "-", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("facts in the graph")
    ax.set_ylabel("recall / search latency, ms")
    ax.set_title("Recall latency versus graph size (bench/results/*.json)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)
    plt.close(fig)
    return True


def render(results: dict[str, dict]) -> str:
    """The report's markdown from these results (the same files always give the same text)."""
    results = dict(results)
    lines = ["# mnemobus benchmark report", "",
             "Generated by `make bench-report` (and `make bench`) from the committed `bench/results/*.json` "
             "(every figure below was measured by the bench named in its section; the machine line carries the "
             "1-minute load average when the file was written).", ""]
    if "bench_locomo" in results:
        lines += locomo_section(results.pop("bench_locomo"))
    if "bench_graphiti" in results:
        lines += graphiti_section(results["bench_graphiti"])
    series = latency_series(results)
    if series:
        lines += ["## Recall latency versus graph size", "", f"![recall latency vs graph size]({PLOT.name})", "",
                  f"(`{PLOT.name}` is drawn by `make bench-report` where matplotlib is installed; it is not committed.)",
                  "", "Series: " + ", ".join(f"{k} ({len(v)} sizes)" for k, v in sorted(series.items())), ""]
    for name, r in results.items():
        if name != "bench_graphiti":
            lines += generic_section(name, r)
    return "\n".join(lines) + "\n"


def main() -> None:
    results = load_results()
    REPORT.write_text(render(results))
    drawn = plot(latency_series({k: v for k, v in results.items() if k != "bench_locomo"}))
    print(f"written {REPORT}" + (f" and {PLOT}" if drawn else ""))


if __name__ == "__main__":
    main()
