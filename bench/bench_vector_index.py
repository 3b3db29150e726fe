"""How much of the true nearest-neighbour top 10 the IVF index finds in a group past `ann_min_rows`, and what a
search costs, on real English: the docstrings of the packages installed in this venv, split into sentences and
embedded with the default (static) embedder.

Run: `make bench-vector-index` (QUICK=1: 10k rows only). Why: no quality bench holds a group past 5,000 rows
(LoCoMo's and the blind set's are smaller), so the index's share of the exact answer went unmeasured; on the
plugin bench's templated messages it looked harmless. Figures: `recall_at_10_<n>` (share of the exact top 10
the index returns, over 400 queries that are sentences not in the group), `search_us_<n>` (CPU a search,
one thread), and the same two for the rule before 2026-11-29 (`old_*`: a 32nd of the lists, at least 8) and the
exact scan's cost (`exact_scan_us_<n>`), measured in the same run. The probe rule (mnemobus/store/vectors.py,
`probes`) was chosen on another split of these sentences (shuffle seed 1); this bench reports on seed 2.

Then what it does to answers, out of the fold the rule was chosen on: each LoCoMo conversation (the dev split,
as `bench_locomo.py` reads it) is one group padded with 10,000 of those sentences as older messages, so its
messages are searched through the index; every question is asked with the hybrid recipe (recall@10 of the
evidence turns, as bench_locomo scores it), with the lists each rule reads and with an exact scan
(`locomo_padded_recall_at_10_{old,new,exact}`). Skipped with QUICK=1 or without the data set.
"""

from __future__ import annotations

import ast
import asyncio
import os
import random
import re
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

from mnemobus.engine.embedders import make_embedder  # noqa: E402
from mnemobus.store.vectors import IvfIndex, probes, top_k  # noqa: E402

QUERIES = 400
PAD = 10_000  # older messages a LoCoMo group is padded with: twice ann_min_rows
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(limit: int) -> list[str]:
    """Distinct sentences of 40-200 characters from the installed packages' docstrings, files in name order."""
    found: set[str] = set()
    for path in sorted(Path(sysconfig.get_paths()["purelib"]).rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(errors="ignore"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
                doc = ast.get_docstring(node)
                for s in SENTENCE.split(" ".join(doc.split())) if doc else ():
                    if 40 <= len(s) <= 200 and s[0].isupper():
                        found.add(s)
        if len(found) >= limit:
            break
    return sorted(found)


def searched(search, queries: np.ndarray, exact: list[set[int]]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(share of the exact top 10 found, CPU microseconds a search)."""
    for q in queries[:50]:
        search(q)
    t = time.process_time()
    got = [search(q) for q in queries]
    spent = (time.process_time() - t) / len(queries) * 1e6
    return float(np.mean([len(ex & set(g.tolist())) / 10 for ex, g in zip(exact, got, strict=True)])), spent


def old_probes(nlist: int) -> int:
    """The rule before 2026-11-29: a 32nd of the lists, at least 8 (the baseline)."""
    return max(8, nlist // 32)


async def locomo_padded(embedder, pad: list[str], dataset: Path) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """recall@10 of LoCoMo's questions, each conversation's group padded past ann_min_rows, per rule and exact."""
    import tempfile
    from datetime import timedelta

    import bench_locomo as locomo

    from mnemobus.engine import MemoryEngine
    from mnemobus.engine.extract_parse import ParsedExtractor
    from mnemobus.shared.groups import GroupId
    from mnemobus.store.model import Episode, RecallQuery, episode_id_for
    from mnemobus.store.sqlite import SqliteStore

    convs = locomo.load_conversations(dataset)
    out: dict[str, float] = {"locomo_padded_messages_per_group": PAD}
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "padded.sqlite3")
        await store.open()
        engine = MemoryEngine(store, ParsedExtractor(), embedder)
        for n, conv in enumerate(convs):
            group, start = GroupId(conv["group"]), min(t[2] for t in conv["turns"])
            older = [Episode(id=episode_id_for(group, f"pad{i}", "user"), group_id=group, content=text, role="user",
                             source_message_id=f"pad{i}", reference_time=start - timedelta(days=30, seconds=i))
                     for i, text in enumerate(pad[n * PAD : (n + 1) * PAD])]
            episodes = older + locomo.turn_episodes(conv)
            for i in range(0, len(episodes), 64):
                await engine.ingest_many(episodes[i : i + 64])

        async def asked() -> float:
            scores = []
            for conv in convs:
                await store.reset_retrieval_counts(GroupId(conv["group"]))
                for question, _, evidence in conv["questions"]:
                    res = await engine.recall(RecallQuery(question, (GroupId(conv["group"]),), recipe="hybrid",
                                                          as_of=conv["end"] + timedelta(days=1), max_facts=10,
                                                          max_episodes=10))
                    scores.append(locomo.recall_at_k(locomo.ranked_turns(res, 10), evidence, 10))
            return round(float(np.mean(scores)), 4)

        await asked()  # the first recall of each group starts its index build
        store.vectors.wait_for_indexes()
        indexes = [m.ann for m in store.vectors._mats.values() if m.ann is not None]
        if not indexes:
            raise SystemExit("no group was indexed: the padding did not pass ann_min_rows")
        for name, rule in (("old", old_probes), ("new", probes)):
            for index in indexes:
                index.nprobe = rule(index.nlist)
            out[f"locomo_padded_recall_at_10_{name}"] = await asked()
        store.vectors.ann_min_rows = 10**9  # every group scanned exactly
        for m in store.vectors._mats.values():
            m.ann = None
        out["locomo_padded_recall_at_10_exact"] = await asked()
        await engine.close()
    return out


def main() -> None:
    sizes = [10_000] if quick() else [10_000, 50_000]
    text = sentences(sizes[-1] + QUERIES)
    if len(text) < sizes[-1] + QUERIES:
        raise SystemExit(f"only {len(text)} sentences in this venv's docstrings; {sizes[-1] + QUERIES} needed")
    random.Random(2).shuffle(text)
    embedder = make_embedder("static", "all-MiniLM-L6-v2-int8", Path(__file__).resolve().parent.parent / "data" / "embeddings")
    queries = np.ascontiguousarray(embedder.embed(text[:QUERIES]), dtype=np.float32)
    figures: dict[str, float] = {"queries": QUERIES}
    for n in sizes:
        rows = np.ascontiguousarray(embedder.embed(text[QUERIES : QUERIES + n]), dtype=np.float32)
        exact = [set(top_k(rows @ q, 10).tolist()) for q in queries]
        _, figures[f"exact_scan_us_{n // 1000}k"] = searched(lambda q: top_k(rows @ q, 10), queries, exact)  # noqa: B023
        index = IvfIndex(rows)
        figures[f"lists_{n // 1000}k"] = index.nlist
        figures[f"probes_{n // 1000}k"] = index.nprobe
        figures[f"recall_at_10_{n // 1000}k"], figures[f"search_us_{n // 1000}k"] = searched(
            lambda q: index.nearest(q, 10)[0], queries, exact)  # noqa: B023
        index.nprobe = old_probes(index.nlist)
        figures[f"old_probes_{n // 1000}k"] = index.nprobe
        figures[f"old_recall_at_10_{n // 1000}k"], figures[f"old_search_us_{n // 1000}k"] = searched(
            lambda q: index.nearest(q, 10)[0], queries, exact)  # noqa: B023
    figures = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
    import bench_locomo as locomo

    dataset = Path(os.environ.get("LOCOMO_PATH", locomo.DEFAULT_PATH))
    if not quick() and dataset.exists():
        random.Random(3).shuffle(text)
        figures.update(asyncio.run(locomo_padded(embedder, text[: 2 * PAD], dataset)))
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("vector index: the exact top 10 found, and a search's cost (real English)", figures)
    write_results("bench_vector_index", figures,
                  "the same index searched with the probe rule before 2026-11-29 (old_*), and the exact scan, same run")


if __name__ == "__main__":
    main()
