"""LoCoMo through the public door: what a Graphiti client of the HTTP API receives, tuned on one conversation
and reported on the other.

Run: `make bench-locomo` runs this after bench_locomo.py (or `.venv/bin/python bench/bench_locomo_public.py`;
QUICK=1 tunes over a smaller grid). The data set is read in place (LOCOMO_PATH, as bench_locomo.py).

- A real memory service: the product's default settings (SQLite, the static embedder, the parser extractor),
  an embedded nats-server, the extraction worker and the HTTP API, started in this process as `mnemobus run`
  starts them. Every turn goes in with POST /messages (group `locomo_<n>`, `role` = the speaker,
  `uuid` = the dia_id, `timestamp` = the session's time plus the turn's index in seconds), and the bench waits
  until the worker stored them all.
- Every question is POST /search {group_ids, query, max_facts = k, as_of = the day after the conversation};
  each returned item maps to its source dia_ids (`source_message_ids`), the first k distinct ids count (a fact
  and the message it came from share an id, so the client asks for 2k items to see k distinct turns).
- Honest tuning: the recall weights (memory.recall.*) are chosen on one conversation (the tuning part) by
  recall@10, then reported on the other (the report part), and the other way round. The shipped defaults are
  reported on both parts too.
- Baselines over the raw turns of the report part, in the same run: BM25 (SQLite FTS5, Porter, the store's own
  tokenizer), vector (the same static embedder) and their fusion (reciprocal rank fusion, k = 60, equal
  weights): the strongest simple system, and what "best baseline" means in the target. Beside them, BM25
  given the engine's turns-around step with the tuned weights: what that step is worth without the rest.
- The plugin's defaults: recall@k of the shipped settings for k = 3..20, and the characters a rendered item
  takes, which is what memory.max_items and context_budget_chars are chosen from.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import (  # noqa: E402
    CATEGORIES, DEFAULT_PATH, fts_hits, fts_turns, load_conversations, per_category, recall_at_k,
)
from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

K = 10
KS_PLUGIN = (3, 5, 8, 10, 15, 20)
#: the grid the tuning part searches (every other weight stays at its default)
GRID: dict[str, tuple[float, ...]] = {
    "rrf_k": (10.0, 30.0),
    "message_weight": (1.0, 1.6, 2.5),
    "context_before": (0.0, 0.3, 0.6),
    "context_after": (0.0, 0.5, 0.7, 0.9),
}
QUICK_GRID: dict[str, tuple[float, ...]] = {"message_weight": (1.0, 1.6), "context_after": (0.0, 0.7)}


def rrf_fuse(rankings: Sequence[Sequence[str]], k: float = 60.0) -> list[str]:
    """Plain reciprocal rank fusion (equal weights), the textbook hybrid of BM25 and vectors."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores, key=lambda i: -scores[i])


def turns_around(conv: dict, ranked: Sequence[tuple[str, float]], before: float, after: float) -> list[str]:
    """A ranking of turns with each hit's neighbours in its session scored as the engine scores them (the hit's
    score times `before`/`after`): the engine's context step given to a baseline, so the table shows what
    that step is worth on its own."""
    order = [t[0] for t in conv["turns"]]
    at = {dia: i for i, dia in enumerate(order)}
    scores = dict(ranked)
    for dia, score_ in ranked:
        for j, weight in ((at[dia] - 1, before), (at[dia] + 1, after)):
            if 0 <= j < len(order) and order[j].split(":")[0] == dia.split(":")[0] and weight > 0:
                scores[order[j]] = max(scores.get(order[j], 0.0), score_ * weight)
    return sorted(scores, key=lambda d: -scores[d])


def baselines(conv: dict, emb: Any, depth: int = 50, context: tuple[float, float] = (0.0, 0.0),
              ) -> dict[str, list[list[str]]]:
    """BM25 (FTS5 Porter), vector and their RRF fusion over one conversation's raw turns, and BM25 with the
    engine's turns-around step (`context` = before, after)."""
    ids = [t[0] for t in conv["turns"]]
    texts = [t[1] for t in conv["turns"]]
    db = fts_turns(texts)
    mat = np.vstack([emb.embed(texts[i: i + 64]) for i in range(0, len(texts), 64)])
    out: dict[str, list[list[str]]] = {"bm25": [], "vector": [], "bm25_vector_rrf": [], "bm25_with_turns_around": []}
    for question, _, _ in conv["questions"]:
        rows = fts_hits(db, question, depth)
        bm = [ids[r[0]] for r in rows]
        out["bm25_with_turns_around"].append(turns_around(conv, [(ids[r], s) for r, s in rows], *context))
        vec = [ids[i] for i in np.argsort(-(mat @ emb.embed([question])[0]))[:depth]]
        out["bm25"].append(bm)
        out["vector"].append(vec)
        out["bm25_vector_rrf"].append(rrf_fuse([bm, vec]))
    return out


def score(conv: dict, retrieved: Sequence[Sequence[str]], k: int = K) -> dict[str, float]:
    rows = [(cat, recall_at_k(ret, ev, k)) for (_, cat, ev), ret in zip(conv["questions"], retrieved, strict=True)]
    return {name: round(v, 4) for name, v in per_category(rows).items()}


def embed_cache() -> Path:
    """Where the static table is kept: $EMBED_CACHE (as bench_locomo reads it; the tests give theirs), else
    data/embeddings."""
    return Path(os.environ.get("EMBED_CACHE", "data/embeddings"))


class Service:
    """The memory service of `mnemobus run` (bus, worker, API) in this process, on one store file."""

    def __init__(self, root: Path, tuning: Mapping[str, float], sections: Mapping[str, Any] | None = None) -> None:
        self.root, self.tuning = root, dict(tuning)
        self.sections = dict(sections or {})  # more config sections (bench_extraction_llm: `extraction`)

    async def __aenter__(self) -> "Service":
        from mnemobus.api.service import EXTRA_URL, run_api
        from mnemobus.shared.config import ApiSettings
        from mnemobus.kernel.app import open_runtime, serve
        from mnemobus.shared.config import Settings

        settings = Settings(
            nats={"data_dir": self.root / "nats", "max_message_bytes": 1024 * 1024},
            store={"backend": "sqlite", "sqlite_path": self.root / "locomo.sqlite3"},
            memory={"outbox_path": self.root / "outbox.sqlite3", "recall": self.tuning,
                    "embedding": {"cache_dir": embed_cache()}},
            metrics={"port": 0}, identity={"users_file": self.root / "users.yaml"}, **self.sections,
        )
        (self.root / "users.yaml").write_text("users: []\n")
        self._stack = stack = contextlib.AsyncExitStack()
        self.rt = await stack.enter_async_context(open_runtime(settings))
        self._tg = await stack.enter_async_context(anyio.create_task_group())
        await self._tg.start(lambda task_status: serve(self.rt, {"worker"}, task_status=task_status))
        await self._tg.start(functools.partial(run_api, self.rt, api=ApiSettings(port=0, search_timeout_s=30)))
        self.http = await stack.enter_async_context(
            httpx.AsyncClient(base_url=self.rt.extra[EXTRA_URL], timeout=60))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.rt.stop.set()
        await self.http.aclose()
        self._tg.cancel_scope.cancel()
        await self._stack.__aexit__(None, None, None)

    async def ingest(self, conv: dict) -> float:
        """Every turn through POST /messages; returns seconds until the worker stored the last one."""
        started = time.perf_counter()
        for i in range(0, len(conv["turns"]), 50):
            messages = [{"uuid": dia, "role_type": "user", "role": text.split(":", 1)[0], "content": text,
                         "timestamp": when.isoformat()} for dia, text, when in conv["turns"][i: i + 50]]
            r = await self.http.post("/messages", json={"group_id": conv["group"], "messages": messages})
            r.raise_for_status()
        store = self.rt.engine.store
        with anyio.fail_after(600):
            while await store.count_episodes(conv["group"]) < len(conv["turns"]):
                await anyio.sleep(0.1)
        return time.perf_counter() - started

    async def ask(self, conv: dict, k: int) -> tuple[list[list[str]], list[list[dict]]]:
        """Each question through POST /search: the dia_ids of the first k items, and the items themselves."""
        as_of = (conv["end"] + timedelta(days=1)).isoformat()
        retrieved, items = [], []
        for question, _, _ in conv["questions"]:
            r = await self.http.post("/search", json={"group_ids": [conv["group"]], "query": question,
                                                      "max_facts": k, "as_of": as_of})
            r.raise_for_status()
            found = r.json()["facts"]
            items.append(found)
            retrieved.append(list(dict.fromkeys(mid for f in found for mid in f["source_message_ids"])))
        return retrieved, items


def grid(points: Mapping[str, Sequence[float]]) -> list[dict[str, float]]:
    names = list(points)
    return [dict(zip(names, values)) for values in itertools.product(*(points[n] for n in names))]


async def main() -> None:
    from mnemobus.engine.embedders import make_embedder

    path = Path(os.environ.get("LOCOMO_PATH", DEFAULT_PATH))
    convs = load_conversations(path)
    if len(convs) < 2:
        raise SystemExit("the tune/report split needs two conversations")
    convs = convs[:2]
    emb = make_embedder("static", "all-MiniLM-L6-v2-int8", embed_cache())
    figures: dict[str, Any] = {}
    settings_grid = grid(QUICK_GRID if quick() else GRID)
    with tempfile.TemporaryDirectory(prefix="locomo-public-") as tmp:
        root = Path(tmp)
        async with Service(root, {}) as svc:  # ingestion once: recall weights do not change what is stored
            for conv in convs:
                figures[f"ingest_s_{conv['group']}"] = round(await svc.ingest(conv), 1)
            defaults = {conv["group"]: await svc.ask(conv, max(KS_PLUGIN)) for conv in convs}
        by_setting: dict[int, dict[str, dict[str, float]]] = {}
        for i, tuning in enumerate(settings_grid):
            async with Service(root, tuning) as svc:
                by_setting[i] = {conv["group"]: score(conv, (await svc.ask(conv, 2 * K))[0]) for conv in convs}
    folds = [(convs[0], convs[1]), (convs[1], convs[0])]
    rows: dict[str, dict[str, float]] = {}
    targets: dict[str, bool] = {}
    for tune, report in folds:
        best_i = max(by_setting, key=lambda i: by_setting[i][tune["group"]]["overall"])
        chosen = settings_grid[best_i]
        tag = f"report_{report['group']}"
        figures[f"{tag}_tuned_on"] = tune["group"]
        figures[f"{tag}_tuned_settings"] = ", ".join(f"{k}={v:g}" for k, v in chosen.items())
        context = (chosen.get("context_before", 0.0), chosen.get("context_after", 0.0))
        base = {name: score(report, ret) for name, ret in baselines(report, emb, context=context).items()}
        windowed = base.pop("bm25_with_turns_around")
        rows[f"{tag}: mnemobus tuned on {tune['group']}"] = by_setting[best_i][report["group"]]
        rows[f"{tag}: mnemobus shipped defaults"] = score(report, [r[:] for r in defaults[report["group"]][0]])
        for name, table in base.items():
            rows[f"{tag}: {name}"] = table
        rows[f"{tag}: bm25 with the tuned turns-around step"] = windowed
        best_base = {cat: max(t.get(cat, 0.0) for t in base.values()) for cat in [*CATEGORIES.values(), "overall"]}
        tuned = by_setting[best_i][report["group"]]
        figures[f"{tag}_hybrid_recall_at_10"] = tuned["overall"]
        figures[f"{tag}_best_baseline_recall_at_10"] = best_base["overall"]
        figures[f"{tag}_fusion_baseline_recall_at_10"] = base["bm25_vector_rrf"]["overall"]
        figures[f"{tag}_bm25_with_turns_around_recall_at_10"] = windowed["overall"]
        targets[f"{tag}_overall_margin_0.05"] = tuned["overall"] >= best_base["overall"] + 0.05
        targets[f"{tag}_every_category"] = all(tuned.get(c, 0.0) >= best_base[c] for c in CATEGORIES.values()
                                               if c in tuned)
    # the plugin's defaults: recall@k of the shipped settings through the same door, and what an item costs
    from mnemobus.engine.render import MESSAGE_CHARS

    for k in KS_PLUGIN:
        both = [(cat, recall_at_k(ret, ev, k)) for conv in convs
                for (_, cat, ev), ret in zip(conv["questions"], defaults[conv["group"]][0], strict=True)]
        figures[f"shipped_recall_at_{k}"] = round(per_category(both)["overall"], 4)
    lengths = [min(len(f["fact"]), MESSAGE_CHARS) + 30 for conv in convs for found in defaults[conv["group"]][1]
               for f in found[:K]]
    figures["rendered_item_chars_mean"] = round(statistics.fmean(lengths), 1)
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print(f"\nLoCoMo through POST /search, recall@{K} on the report part (tuned on the other conversation)")
    cats = [*CATEGORIES.values(), "overall"]
    print(f"{'system':<58}" + "".join(f"{c:>12}" for c in cats))
    for name, table in rows.items():
        print(f"{name:<58}" + "".join(f"{table.get(c, float('nan')):>12.3f}" for c in cats))
    for name, table in rows.items():
        for c in cats:
            if c in table:
                figures[f"{name.replace(': ', '__').replace(' ', '_')}__{c}"] = table[c]
    figures.update({f"target_{k}": v for k, v in targets.items()})
    print_table("LoCoMo public-door figures", figures)
    write_results("bench_locomo_public", figures, baseline="BM25 (SQLite FTS5, Porter), vector (static embedder) "
                  "and their RRF fusion (k=60) over the raw turns of the report conversation, same run")


if __name__ == "__main__":
    asyncio.run(main())
