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
"""

from __future__ import annotations

import ast
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
from mnemobus.store.vectors import IvfIndex, top_k  # noqa: E402

QUERIES = 400
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
        index.nprobe = max(8, index.nlist // 32)  # the rule before 2026-11-29: the baseline
        figures[f"old_probes_{n // 1000}k"] = index.nprobe
        figures[f"old_recall_at_10_{n // 1000}k"], figures[f"old_search_us_{n // 1000}k"] = searched(
            lambda q: index.nearest(q, 10)[0], queries, exact)  # noqa: B023
    figures = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("vector index: the exact top 10 found, and a search's cost (real English)", figures)
    write_results("bench_vector_index", figures,
                  "the same index searched with the probe rule before 2026-11-29 (old_*), and the exact scan, same run")


if __name__ == "__main__":
    main()
