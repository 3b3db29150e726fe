"""Community summaries as a recall signal (issue 39, `memory.recall.communities`) through the public door, against
`communities: off`: tuned on one LoCoMo dev conversation (the weight of the matched communities' facts) and
reported on the other, both folds, per category, as bench_graph_recall.py does for graph recall.

Run: `.venv/bin/python bench/bench_community_recall.py` (QUICK=1 tries one weight).

- The service of bench_locomo_public.py (POST /messages in, POST /search out, the product's defaults), ingested
  once, then every group's communities refreshed (`memory.api.graph.refresh`, as the worker does every
  `communities.refresh_every_episodes`); one service per setting of the grid.
- Free parameter: `community_weight`; every other key at its default.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_graph_recall import CATS  # noqa: E402
from bench_locomo import DEFAULT_PATH, load_conversations  # noqa: E402
from bench_locomo_public import K, Service, score  # noqa: E402
from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

WEIGHTS = (0.25, 0.5, 1.0)


def grid() -> list[dict[str, Any]]:
    """off, then on at each weight; BENCH_COMMUNITY_EXTRA (a JSON object of recall keys, e.g.
    '{"min_community_similarity": 0}') is applied to every `on` setting, BENCH_COMMUNITY_RESULTS names the result
    file of such a variant run."""
    extra = json.loads(os.environ.get("BENCH_COMMUNITY_EXTRA", "{}"))
    return [{"communities": "off"}, *({"communities": "on", "community_weight": w, **extra}
                                      for w in ((0.5,) if quick() else WEIGHTS))]


async def main() -> None:
    from mnemobus.shared import subjects

    convs = load_conversations(Path(os.environ.get("LOCOMO_PATH", DEFAULT_PATH)))[:2]
    settings = grid()
    results: dict[int, dict[str, dict[str, float]]] = {}
    figures: dict[str, Any] = {"load_average_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="community-recall-") as tmp:
        root = Path(tmp)
        async with Service(root, {}) as svc:
            for conv in convs:
                figures[f"ingest_s_{conv['group']}"] = round(await svc.ingest(conv), 1)
                t = time.perf_counter()
                msg = await svc.rt.bus.request(subjects.api("graph.refresh"),
                                               json.dumps({"group_id": conv["group"]}).encode(), 120)
                refresh = json.loads(msg.data)["refreshes"][0]
                figures[f"communities_{conv['group']}"] = refresh["communities"]
                figures[f"refresh_s_{conv['group']}"] = round(time.perf_counter() - t, 2)
        for i, setting in enumerate(settings):
            async with Service(root, setting) as svc:
                results[i] = {c["group"]: score(c, (await svc.ask(c, 2 * K))[0]) for c in convs}
            print(f"{setting}" + "".join(f"  {c['group']} {results[i][c['group']]['overall']:.3f}" for c in convs),
                  flush=True)
    for tune, report in ((convs[0], convs[1]), (convs[1], convs[0])):
        t, r = tune["group"], report["group"]
        tag = f"report_{r}"
        on = [i for i, s in enumerate(settings) if s["communities"] == "on"]
        best_on = max(on, key=lambda i: results[i][t]["overall"])
        chosen = max(range(len(settings)), key=lambda i: results[i][t]["overall"])
        figures[f"{tag}_tuned_on"] = t
        figures[f"{tag}_on_setting"] = json.dumps(settings[best_on])
        figures[f"{tag}_chosen_setting"] = json.dumps(settings[chosen])
        for c in CATS:
            figures[f"{tag}__off__{c}"] = results[0][r].get(c)
            figures[f"{tag}__on__{c}"] = results[best_on][r].get(c)
        figures[f"{tag}_on_minus_off_overall"] = round(results[best_on][r]["overall"] - results[0][r]["overall"], 4)
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    figures["load_average_end"] = round(os.getloadavg()[0], 2)
    print_table(f"community recall, LoCoMo dev through POST /search, recall@{K} on the report conversation", figures)
    write_results(os.environ.get("BENCH_COMMUNITY_RESULTS", "bench_community_recall"), figures, baseline="communities: off, same run, same service and store")


if __name__ == "__main__":
    asyncio.run(main())
