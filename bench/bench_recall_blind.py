"""Recall on conversations written blind: the out-of-fold check of every recall signal's default.

Run: `make bench-recall-blind` (or `.venv/bin/python bench/bench_recall_blind.py`; BLIND_PATH names another file).

Why: the LoCoMo dev conversations are what the recall weights were tuned on, and a held-out half written by the
same hand in the same shapes is not held out. The set in bench/recall_set/blind/ was written by a writer who saw
neither this project nor LoCoMo, to a brief (its README), and frozen. Nothing is tuned on it: every system below is
fixed before the run (the shipped defaults, chosen on LoCoMo dev; each graph mode at the weight LoCoMo dev's fold
favoured, 0.1, with bench_graph_recall's 1 s bound on the second hop; the shipped defaults without vectors, and
with the walk from the query's entities), so the table says which signals earn their place on
conversations nobody tuned on.

- The service is `mnemobus run`'s (bench_locomo_public.Service): every turn through POST /messages, every question
  through POST /search, recall@10 over the first 10 distinct source turns.
- Baselines over the raw turns, same run: BM25 (FTS5, Porter), vector (the static embedder), their RRF fusion, and
  BM25 given the engine's turns-around step at the shipped weights (the strongest simple system).
- Differences are paired over the questions of every conversation, with a 95% bootstrap interval (2,000 resamples,
  fixed seed): a signal whose interval lies below zero lowers recall out of its tuning data.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import CATEGORIES, load_conversations, per_category, recall_at_k  # noqa: E402
from bench_locomo_public import K, Service, baselines, embed_cache  # noqa: E402
from common import peak_rss_mb, print_table, write_results  # noqa: E402

DEFAULT_PATH = Path(__file__).resolve().parent / "recall_set" / "blind" / "blind_recall.json"
BASELINE = "bm25_with_turns_around"
#: every system fixed before the run (nothing is tuned on this set)
SYSTEMS: dict[str, dict[str, Any]] = {
    "shipped": {},
    "shipped_without_vectors": {"vector_weight": 0.0},
    # the walk from the query's entities as one more fact ranking, on in hybrid until issue 36 measured it here
    "shipped_with_walk": {"walk": True},
    # the second hop's time bound raised so that the machine's load does not decide what the graph reaches
    **{f"graph_{mode}": {"graph": mode, "graph_episode_weight": 0.1, "graph_time_budget_ms": 1000}
       for mode in ("bfs", "activation", "ppr", "ppr_turns")},
}
CATS = [*CATEGORIES.values(), "overall"]


def per_question(conv: dict, retrieved: Sequence[Sequence[str]]) -> list[tuple[int, float]]:
    return [(cat, recall_at_k(ret, ev, K)) for (_, cat, ev), ret in zip(conv["questions"], retrieved, strict=True)]


def paired_interval(a: Sequence[float], b: Sequence[float], *, resamples: int = 2000,
                    seed: int = 7) -> tuple[float, float, float]:
    """Mean of a - b over paired questions and its 95% bootstrap interval."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(resamples))
    return statistics.fmean(diffs), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


async def run_systems(convs: list[dict], root: Path, figures: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Each system's per-question recall@10 over every conversation, in one order."""
    out: dict[str, list[tuple[int, float]]] = {}
    async with Service(root, {}) as svc:  # ingestion once: recall settings do not change what is stored
        for conv in convs:
            figures[f"ingest_s_{conv['group']}"] = round(await svc.ingest(conv), 1)
            figures[f"facts_extracted_{conv['group']}"] = await svc.rt.engine.store.count_facts(conv["group"])
    for name, tuning in SYSTEMS.items():
        async with Service(root, tuning) as svc:
            out[name] = [row for conv in convs for row in per_question(conv, (await svc.ask(conv, 2 * K))[0])]
        print(f"{name:<28} {per_category(out[name])['overall']:.3f}", flush=True)
    return out


def simple_systems(convs: list[dict], emb: Any) -> dict[str, list[tuple[int, float]]]:
    from mnemobus.engine.recipes import RECIPES, DEFAULT_RECIPE

    shipped = RECIPES[DEFAULT_RECIPE]
    out: dict[str, list[tuple[int, float]]] = {}
    for conv in convs:
        for name, ranked in baselines(conv, emb, context=(shipped.context_before, shipped.context_after)).items():
            out.setdefault(name, []).extend(per_question(conv, ranked))
    return out


def report(scores: Mapping[str, list[tuple[int, float]]], figures: dict[str, Any], data: str) -> None:
    tables = {name: per_category(rows) for name, rows in scores.items()}
    print(f"\n{data} through POST /search, recall@{K} (nothing tuned on it)")
    print(f"{'system':<28}" + "".join(f"{c:>12}" for c in CATS))
    for name, table in tables.items():
        print(f"{name:<28}" + "".join(f"{table.get(c, float('nan')):>12.3f}" for c in CATS))
        for c in CATS:
            if c in table:
                figures[f"{name}__{c}"] = round(table[c], 4)
    values = {name: [v for _, v in rows] for name, rows in scores.items()}
    pairs = [("shipped", BASELINE)] + [(name, "shipped") for name in SYSTEMS if name != "shipped"]
    print(f"\n{'paired difference':<48}{'mean':>9}{'95% CI':>22}")
    for a, b in pairs:
        mean, lo, hi = paired_interval(values[a], values[b])
        print(f"{a + ' - ' + b:<48}{mean:>+9.4f}   [{lo:+.4f}, {hi:+.4f}]")
        figures[f"diff_{a}_minus_{b}"] = round(mean, 4)
        figures[f"diff_{a}_minus_{b}_ci_low"] = round(lo, 4)
        figures[f"diff_{a}_minus_{b}_ci_high"] = round(hi, 4)
    shipped, base = tables["shipped"], tables[BASELINE]
    figures["target_shipped_overall_baseline_plus_0.03"] = shipped["overall"] >= base["overall"] + 0.03
    figures["target_shipped_no_category_below_baseline"] = all(
        shipped.get(c, 0.0) >= base[c] for c in CATEGORIES.values() if c in base)


async def main() -> None:
    from mnemobus.engine.embedders import make_embedder

    path = Path(os.environ.get("BLIND_PATH", DEFAULT_PATH))
    convs = load_conversations(path)
    figures: dict[str, Any] = {"data": str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path),
                               "conversations": len(convs), "questions": sum(len(c["questions"]) for c in convs),
                               "turns": sum(len(c["turns"]) for c in convs)}
    emb = make_embedder("static", "all-MiniLM-L6-v2-int8", embed_cache())
    with tempfile.TemporaryDirectory(prefix="recall-blind-") as tmp:
        scores = await run_systems(convs, Path(tmp), figures)
    scores.update(simple_systems(convs, emb))
    report(scores, figures, path.name)
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("blind recall figures", figures)
    write_results("bench_recall_blind", figures, baseline="BM25 (SQLite FTS5, Porter) over the raw turns, with and "
                  "without the engine's turns-around step at the shipped weights; vector (static embedder); their "
                  "RRF fusion; same run, same conversations")


if __name__ == "__main__":
    asyncio.run(main())
