"""Graph recall (issue 37) through the public door: each `memory.recall.graph` mode against `graph: off` and
against the strongest simple baseline, SQLite FTS5 given the engine's turns-around step, both tuned on one
LoCoMo dev conversation and reported on the other (both folds), per category.

Run: `make bench-graph-recall` (or `.venv/bin/python bench/bench_graph_recall.py`; QUICK=1 tries fewer weights).

- The service of bench_locomo_public.py (POST /messages in, POST /search out, the product's defaults: SQLite,
  the static embedder, the parser extractor), ingested once; one service per setting of the grid.
- Free parameters: the mode, and one weight (`graph_episode_weight`, the share of the turns it reaches in the
  fusion); every other graph key stays at its default (mnemobus/engine/recipes.py). The engine's own weights
  stay at their shipped values.
- The baseline is tuned the same way: its turns-around weights (before, after) are chosen on the tuning
  conversation from bench_locomo_public's grid, then reported on the other.
- Per fold: the mode and weight that win on the tuning conversation, reported on the other, and every mode at
  its own best tuning weight reported on the other (what each mode gave).
- Diagnostic, never a shipped figure: `--facts observations` writes, after the same ingestion, LoCoMo's
  LLM-written observations as oracle facts and mention links on top of the parser's (bench/graph_oracle.py):
  does any graph mode earn its place when the graph is as dense as a capable extractor would make it? Its
  results go to bench_graph_recall_oracle.json unless BENCH_GRAPH_RESULTS says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import CATEGORIES, DEFAULT_PATH, load_conversations  # noqa: E402
from bench_locomo_public import GRID, K, Service, baselines, grid, score  # noqa: E402
from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402
from graph_oracle import write_observations  # noqa: E402

MODES = ("bfs", "activation", "ppr", "ppr_turns")
WEIGHTS = (0.1, 0.25, 0.5)
QUICK_WEIGHTS = (0.5,)
CATS = [*CATEGORIES.values(), "overall"]


def settings() -> list[dict[str, Any]]:
    """graph: off, then each mode at each weight (or each number of slots, BENCH_GRAPH_SLOTS); BENCH_GRAPH_EXTRA (a JSON object of graph keys, e.g.
    '{"graph_inhibition": 0}') is applied to every mode's settings; BENCH_GRAPH_MODES (comma-separated) picks
    the modes, BENCH_GRAPH_RESULTS names the result file of such a variant run."""
    extra = json.loads(os.environ.get("BENCH_GRAPH_EXTRA", "{}"))
    slots = os.environ.get("BENCH_GRAPH_SLOTS")  # e.g. "1,2,3": each mode at weight 0.1 with that many turn slots
    vary = ([{"graph_episode_weight": 0.1, "graph_episode_slots": int(n)} for n in slots.split(",")] if slots else
            [{"graph_episode_weight": w} for w in (QUICK_WEIGHTS if quick() else WEIGHTS)])
    out: list[dict[str, Any]] = [{"graph": "off"}]
    for mode in os.environ.get("BENCH_GRAPH_MODES", ",".join(MODES)).split(","):
        out += [{"graph": mode, **v, **extra} for v in vary]
    return out


def label(setting: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting.items())


def tuned_baseline(tune: dict, report: dict, emb: Any) -> tuple[tuple[float, float], dict[str, float]]:
    """FTS5 + turns-around: the (before, after) weights best on `tune`, and their scores on `report`."""
    points = [(b, a) for b in GRID["context_before"] for a in GRID["context_after"]]
    best = max(points, key=lambda c: score(tune, baselines(tune, emb, context=c)["bm25_with_turns_around"])["overall"])
    return best, score(report, baselines(report, emb, context=best)["bm25_with_turns_around"])


async def main(facts: str) -> None:
    from mnemobus.engine.embedders import make_embedder

    path = Path(os.environ.get("LOCOMO_PATH", DEFAULT_PATH))
    convs = load_conversations(path)[:2]
    if len(convs) < 2:
        raise SystemExit("the tune/report split needs two conversations")
    emb = make_embedder("static", "all-MiniLM-L6-v2-int8", Path("data/embeddings"))
    grid_ = settings()
    results: dict[int, dict[str, dict[str, float]]] = {}
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="graph-recall-") as tmp:
        root = Path(tmp)
        async with Service(root, {}) as svc:  # ingestion once: recall settings do not change what is stored
            for n, conv in enumerate(convs):
                figures[f"ingest_s_{conv['group']}"] = round(await svc.ingest(conv), 1)
                figures[f"turns_{conv['group']}"] = len(conv["turns"])
                figures[f"facts_extracted_{conv['group']}"] = await svc.rt.engine.store.count_facts(conv["group"])
                if facts == "observations":
                    for key, value in (await write_observations(svc.rt.engine, path, n, conv)).items():
                        figures[f"oracle_{key}_{conv['group']}"] = value
                    figures[f"facts_with_oracle_{conv['group']}"] = await svc.rt.engine.store.count_facts(conv["group"])
        figures["facts"] = facts
        for i, setting in enumerate(grid_):
            async with Service(root, setting) as svc:
                results[i] = {c["group"]: score(c, (await svc.ask(c, 2 * K))[0]) for c in convs}
            print(f"{label(setting):<48}" + "".join(
                f"  {c['group']} {results[i][c['group']]['overall']:.3f}" for c in convs), flush=True)
    rows: dict[str, dict[str, float]] = {}
    for tune, report in ((convs[0], convs[1]), (convs[1], convs[0])):
        t, r = tune["group"], report["group"]
        tag = f"report_{r}"
        context, base = tuned_baseline(tune, report, emb)
        rows[f"{tag}: fts5 + turns-around (before={context[0]:g}, after={context[1]:g}, tuned on {t})"] = base
        rows[f"{tag}: graph off"] = results[0][r]
        for mode in dict.fromkeys(s["graph"] for s in grid_[1:]):
            own = [i for i, s in enumerate(grid_) if s["graph"] == mode]
            best = max(own, key=lambda i: results[i][t]["overall"])
            rows[f"{tag}: {mode} ({label(grid_[best])}, tuned on {t})"] = results[best][r]
            for c in CATS:
                figures[f"{tag}__{mode}__{c}"] = results[best][r].get(c)
        chosen = max(range(len(grid_)), key=lambda i: results[i][t]["overall"])
        figures[f"{tag}_tuned_on"] = t
        figures[f"{tag}_chosen_setting"] = label(grid_[chosen])
        figures[f"{tag}_baseline_context"] = f"before={context[0]:g}, after={context[1]:g}"
        for c in CATS:
            figures[f"{tag}__chosen__{c}"] = results[chosen][r].get(c)
            figures[f"{tag}__graph_off__{c}"] = results[0][r].get(c)
            figures[f"{tag}__fts5_turns_around__{c}"] = base.get(c)
        chosen_r, base_r = results[chosen][r], base
        figures[f"{tag}_chosen_minus_baseline_overall"] = round(chosen_r["overall"] - base_r["overall"], 4)
        figures[f"{tag}_chosen_minus_graph_off_overall"] = round(chosen_r["overall"] - results[0][r]["overall"], 4)
        figures[f"target_{tag}_multi_hop_0.50"] = chosen_r.get("multi-hop", 0.0) >= 0.50
        figures[f"target_{tag}_overall_baseline_plus_0.03"] = chosen_r["overall"] >= base_r["overall"] + 0.03
        figures[f"target_{tag}_no_category_below_baseline"] = all(
            chosen_r.get(c, 0.0) >= base_r[c] for c in CATEGORIES.values() if c in base_r)
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(f"\nLoCoMo dev through POST /search, recall@{K} on the report conversation")
    print(f"{'system':<86}" + "".join(f"{c:>12}" for c in CATS))
    for name, table in rows.items():
        print(f"{name:<86}" + "".join(f"{table.get(c, float('nan')):>12.3f}" for c in CATS))
    print_table("graph recall figures", figures)
    default_name = "bench_graph_recall_oracle" if facts == "observations" else "bench_graph_recall"
    write_results(os.environ.get("BENCH_GRAPH_RESULTS", default_name), figures, baseline="SQLite FTS5 (Porter) over the raw turns with the "
                  "engine's turns-around step, its weights tuned on the other conversation; and graph: off, same run")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", choices=("extractor", "observations"), default="extractor",
                        help="the graph's facts: the product's extractor (default), or LoCoMo's observations as an "
                             "oracle extractor (a diagnostic upper bound, bench/graph_oracle.py)")
    asyncio.run(main(parser.parse_args().facts))
