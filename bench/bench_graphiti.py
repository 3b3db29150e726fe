"""mnemobus vs Graphiti, side by side: search latency p50/p95/p99 and evidence recall@5/@10 on the same graph.

Run: `make bench-graphiti` (or `.venv/bin/python bench/bench_graphiti.py`); QUICK=1 for 2k facts;
BENCH_SIZES=10k,100k picks sizes (default 10k); EMBEDDER=static|local|hash picks the embedder of
both systems (default: the product's, `memory.embedding.provider`); BENCH_QUERIES=N overrides the
number of queries (default 200 at 2k, 1000 at 10k, 300 at 100k); BENCH_MERGE=1 keeps the figures
of sizes this run did not measure in bench/results/bench_graphiti.json. Needs bench/.venv-graphiti (the
make target creates it) and the Neo4j jars (`make neo4j-jars`).

- One generated corpus with known answers: people (first + last name), places, employers,
  tools, hobbies, pets and colleagues; every fact is one sentence ("Ana Silva lives in Lisbon.")
  about one (person, relation) pair, so each query ("Where does Ana Silva live?") has exactly
  one correct fact. Each fact also has one episode (the message that stated it).
- Vectors: every entity name and fact sentence is embedded once by the chosen embedder
  (mnemobus.engine.embed.make_embedder: `static`, the product default, a token table distilled
  from all-MiniLM-L6-v2; `local`, that transformer itself), uncached; both systems store the same
  vectors, and both embed queries with that same code (Graphiti through an EmbedderClient wrapping
  it, bench/graphiti_side.py, which loads embed.py and embed_static.py by path). Every query
  vector either side made is recorded and the two sides compared (`*_query_vector_max_abs_diff`).
  No LLM anywhere: nothing is extracted, the graph is given.
- mnemobus: SqliteStore.bulk_load_sync (entities, facts with vectors) plus the episodes
  through the store's transaction API; queries through MemoryEngine.recall (max_facts=10,
  max_episodes=0) with each recipe in MNEMOBUS_RECIPES (default `hybrid` = full-text + vector +
  graph walk, then `text`), each on the same store with retrieval counts reset to zero first
  (recall boosts facts it returned before, which would let one recipe's run tilt the next).
- Graphiti (graphiti-core 0.31, its own venv): EntityNode / EntityEdge / EpisodicNode
  objects written by graphiti-core's bulk writer into a local Neo4j 5.26 (mnemobus.kernel.neo4j_local),
  queries through `Graphiti.search_` with EDGE_HYBRID_SEARCH_RRF (BM25 + cosine, RRF, no
  LLM reranker), limit 10. Same queries, same groups, same order, measured one after the other.
- Figures: latency p50/p95/p99 per system, recall@5/@10 of the known fact, ratios
  Graphiti / mnemobus, the machine's load average while each system was measured, and the peak
  resident memory (VmHWM) of each process: this one (mnemobus), the Graphiti client, Neo4j.
- MISSES=N prints N queries that Graphiti has in its top 5 and mnemobus's headline recipe does
  not, with both top 5s (what the recall gap is made of).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import percentile, print_table, quick, result_path, write_results  # noqa: E402

from mnemobus.shared.procmem import memory_mb  # noqa: E402  (stdlib only: safe in the Graphiti venv too)

BENCH_DIR = Path(__file__).resolve().parent
GRAPHITI_PY = BENCH_DIR / ".venv-graphiti" / "bin" / "python"
K = 10
RECIPES = os.environ.get("MNEMOBUS_RECIPES", "hybrid,text").split(",")  # the first is the headline
NOW = datetime.now(UTC).replace(microsecond=0)
ROOT = BENCH_DIR.parent
# size -> (facts, groups, queries, Neo4j heap, Neo4j page cache): the page cache holds the whole graph
SIZES = {"2k": (2_000, 1, 200, "512m", "256m"), "10k": (10_000, 1, 1000, "1g", "512m"),
         "100k": (100_000, 10, 300, "2g", "1536m")}

FIRST = """Ana Ben Carla Dmitri Elena Farid Greta Hiro Ines Jonas Kamala Lars Mei Nikolai Olga Pablo Quinn Rosa
Samir Tara Umar Vera Wen Ximena Yusuf Zoe Aiden Bianca Chen Dara Emil Fatima Gustav Hana Ivan Jada Kofi Lena
Marco Nadia Oscar Priya Rafael Sofia Tomas Uma Viktor Wanda Yara Zane""".split()
LAST = """Silva Novak Okafor Larsen Moreau Tanaka Kowalski Haddad Schmidt Rossi Petrov Nguyen Garcia Kim Jensen
Murphy Costa Ivanova Bauer Fischer Dubois Sato Mendes Yilmaz Horvat Lindqvist Abara Castillo Weber Romano
Sousa Kaur Brennan Popescu Varga Nakamura Ortiz Lehmann Duarte Hughes""".split()
CITIES = """Lisbon Oslo Nairobi Osaka Lyon Krakow Seattle Montreal Porto Valencia Tallinn Dublin Kyoto Austin
Bergen Cusco Hanoi Tbilisi Zagreb Accra Quito Perth Leeds Turin Graz Malmo Izmir Cebu Hobart Rosario""".split()
COMPANIES = """Acme Globex Initech Umbrella Hooli Vandelay Soylent Stark Wayne Tyrell Cyberdyne Aperture
Wonka Gringotts Monarch Oscorp Massive Dynamic Virtucon Pied-Piper""".split()
TOOLS = """Postgres Redis Kafka Kubernetes Terraform Rust Haskell Elixir Figma Blender Excel Jupyter Vim Emacs
Docker Grafana Ansible Spark Flutter Django""".split()
HOBBIES = """climbing sailing pottery chess birdwatching baking fencing surfing knitting cycling origami
gardening archery kayaking painting""".split()
PETS = "cat dog parrot rabbit tortoise hamster ferret goldfish iguana horse".split()

RELATIONS = {  # relation -> (fact template, question template, object pool or "person")
    "lives_in": ("{s} lives in {o}.", "Where does {s} live?", CITIES),
    "works_at": ("{s} works at {o}.", "Which company does {s} work for?", COMPANIES),
    "uses": ("{s} uses {o} every day at work.", "What tool does {s} use at work?", TOOLS),
    "enjoys": ("{s} enjoys {o} on weekends.", "What hobby does {s} have?", HOBBIES),
    "owns_pet": ("{s} has a pet {o}.", "What kind of pet does {s} own?", PETS),
    "manages": ("{s} manages {o}.", "Who is managed by {s}?", "person"),
    "mentors": ("{s} mentors {o}.", "Who does {s} mentor?", "person"),
    "born_in": ("{s} was born in {o}.", "In which city was {s} born?", CITIES),
}


def make_corpus(n_facts: int, n_groups: int, n_queries: int, seed: int = 9) -> dict:
    """Entities, facts (one per person and relation), episodes and queries with their one right answer."""
    rng = random.Random(seed)
    per_group = n_facts // n_groups
    people_per_group = max(2, per_group // len(RELATIONS) + 1)
    all_names = [f"{f} {last}" for f in FIRST for last in LAST]
    entities, facts = [], []
    for g in range(n_groups):
        group = f"user_bench{g}"
        people = rng.sample(all_names, min(len(all_names), people_per_group))
        if people_per_group > len(all_names):  # big groups: add middle initials to stay distinct
            people += [f"{rng.choice(FIRST)} {chr(65 + i % 26)}. {rng.choice(LAST)}{i // 26 or ''}"
                       for i in range(people_per_group - len(all_names))]
        ent_ids: dict[str, str] = {}

        def entity(name: str, group: str = group, ent_ids: dict = ent_ids) -> str:
            if name not in ent_ids:
                ent_ids[name] = f"{group}-e{len(ent_ids)}"
                entities.append({"id": ent_ids[name], "name": name, "group": group})
            return ent_ids[name]

        pairs = [(p, r) for p in people for r in RELATIONS]
        rng.shuffle(pairs)
        for i, (person, rel) in enumerate(pairs[:per_group]):
            template, _, pool = RELATIONS[rel]
            obj = rng.choice([x for x in people if x != person]) if pool == "person" else rng.choice(pool)
            fid = f"{group}-f{i}"
            facts.append({"id": fid, "group": group, "subject": person, "object": obj, "relation": rel,
                          "subject_id": entity(person), "object_id": entity(obj),
                          "fact": template.format(s=person, o=obj), "episode_id": f"{group}-ep{i}",
                          "valid_at": (NOW - timedelta(days=rng.uniform(1, 30))).isoformat()})
    queries = []
    for f in rng.sample(facts, min(n_queries, len(facts))):
        queries.append({"text": RELATIONS[f["relation"]][1].format(s=f["subject"]), "group": f["group"],
                        "answer": f["id"]})
    return {"entities": entities, "facts": facts, "queries": queries, "now": NOW.isoformat(), "k": K}


def embedder_spec() -> dict[str, str]:
    """EMBEDDER (default: the product's provider) with the product's model and table folder; both sides use it."""
    from mnemobus.shared.config import EmbeddingSettings

    settings = EmbeddingSettings()
    cache = settings.cache_dir if settings.cache_dir.is_absolute() else ROOT / settings.cache_dir
    return {"provider": os.environ.get("EMBEDDER") or settings.provider, "model": settings.model,
            "cache_dir": str(cache)}


def make_bench_embedder(spec: dict[str, str], make_embedder=None):  # type: ignore[no-untyped-def]
    """The product's make_embedder, minus its LRU cache: every query pays for its own embedding, on both sides.

    graphiti_side.py passes the make_embedder of its by-path copy of mnemobus/engine/embed.py.
    """
    if make_embedder is None:
        from mnemobus.engine.embedders import make_embedder
    emb = make_embedder(spec["provider"], spec["model"], spec["cache_dir"])
    return getattr(emb, "inner", emb)  # CachedEmbedder -> the model behind it


class RecordingEmbedder:
    """Keeps the vector of every single-text call, so the two sides' query vectors can be compared."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.vectors: dict[str, np.ndarray] = {}

    def embed(self, texts):  # type: ignore[no-untyped-def]
        out = self.inner.embed(texts)
        if len(texts) == 1:
            self.vectors[texts[0]] = out[0]
        return out


def embed_corpus(corpus: dict, cache: Path, spec: dict[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Names and fact sentences through the chosen embedder once; cached by content and embedder."""
    emb = make_bench_embedder(spec)
    digest = hashlib.sha256(f"{spec['provider']}/{emb.name}\n".encode())
    digest.update("\n".join(e["name"] for e in corpus["entities"]).encode())
    digest.update("\n".join(f["fact"] for f in corpus["facts"]).encode())
    key = f"{spec['provider']}_{len(corpus['entities'])}_{len(corpus['facts'])}_{digest.hexdigest()[:12]}"
    ent_path, fact_path = cache / f"gbench_ent_{key}.npy", cache / f"gbench_fact_{key}.npy"
    if ent_path.exists() and fact_path.exists():
        return np.load(ent_path), np.load(fact_path)

    def run(texts: list[str]) -> np.ndarray:
        return np.vstack([emb.embed(texts[i : i + 256]) for i in range(0, len(texts), 256)])

    ent = run([e["name"] for e in corpus["entities"]]).astype(np.float32)
    fact = run([f["fact"] for f in corpus["facts"]]).astype(np.float32)
    np.save(ent_path, ent)
    np.save(fact_path, fact)
    return ent, fact


def peak_rss_of(pid: int | str = "self") -> float | None:
    """VmHWM (peak resident set) of one process in MiB, from /proc; None when it is gone or not Linux."""
    mb = memory_mb(pid, "VmHWM")
    return None if mb is None else round(mb, 1)


def recall_of(retrieved: list[list[str]], queries: list[dict], k: int) -> float:
    return sum(q["answer"] in r[:k] for r, q in zip(retrieved, queries, strict=True)) / max(1, len(queries))


def latency_figures(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {f"p{q}_ms": round(percentile(ms, q), 2) for q in (50, 95, 99)}


async def run_mnemobus(corpus: dict, ent_vecs: np.ndarray, fact_vecs: np.ndarray, root: Path, warmup: int,
                       spec: dict[str, str]) -> dict:
    from mnemobus.engine import MemoryEngine
    from mnemobus.shared.groups import GroupId
    from mnemobus.store.model import Entity, Episode, Fact, RecallQuery
    from mnemobus.store.sqlite import SqliteStore

    store = SqliteStore(root / "mnemobus.sqlite3")
    await store.open()
    t = time.perf_counter()
    ents = [(Entity(id=e["id"], group_id=GroupId(e["group"]), name=e["name"], canonical_name=e["name"].lower(),
                    first_seen=NOW, last_seen=NOW), ent_vecs[i]) for i, e in enumerate(corpus["entities"])]
    facts = []
    for i, f in enumerate(corpus["facts"]):
        valid = datetime.fromisoformat(f["valid_at"])
        facts.append((Fact(id=f["id"], group_id=GroupId(f["group"]), subject_id=f["subject_id"],
                           object_id=f["object_id"], subject_name=f["subject"], object_name=f["object"],
                           relation=f["relation"], edge_type="semantic", fact=f["fact"], confidence=0.9,
                           valid_at=valid, invalid_at=None, created_at=valid, last_seen=valid,
                           episode_ids=(f["episode_id"],), source_message_ids=(f["episode_id"],)), fact_vecs[i]))
    await asyncio.to_thread(store.bulk_load_sync, ents, facts)
    for i in range(0, len(corpus["facts"]), 1000):
        async with store.transaction() as txn:
            for j, f in enumerate(corpus["facts"][i : i + 1000], start=i):
                ep = Episode(id=f["episode_id"], group_id=GroupId(f["group"]), content=f"user: {f['fact']}",
                             role="user", source_message_id=f["episode_id"],
                             reference_time=datetime.fromisoformat(f["valid_at"]))
                await txn.insert_episode(ep, screened=False, embedding=fact_vecs[j])
    load_s = time.perf_counter() - t
    emb = RecordingEmbedder(make_bench_embedder(spec))  # uncached, like the Graphiti side
    emb.embed(["warm up"])
    engine = MemoryEngine(store, embedder=emb)
    queries = corpus["queries"]
    out = {}
    for recipe in RECIPES:
        def ask(q: dict, recipe: str = recipe) -> RecallQuery:
            return RecallQuery(q["text"], (GroupId(q["group"]),), as_of=NOW, max_facts=K, max_episodes=0,
                               recipe=recipe)

        for q in queries[:warmup]:
            await engine.recall(ask(q))
        for group in sorted({q["group"] for q in queries}):  # recall boosts what it returned; every recipe starts clean
            await store.reset_retrieval_counts(GroupId(group))
        lat, retrieved = [], []
        load0 = os.getloadavg()[0]
        for q in queries:
            t = time.perf_counter()
            res = await engine.recall(ask(q))
            lat.append(time.perf_counter() - t)
            retrieved.append([sf.fact.id for sf in res.facts])
        load = round((load0 + os.getloadavg()[0]) / 2, 2)
        out[f"mnemobus_{recipe}"] = {"latencies_s": lat, "retrieved": retrieved, "load_s": round(load_s, 2),
                                     "load": load}
    await engine.close()
    out["query_vectors"] = emb.vectors
    return out


def run_graphiti(corpus: dict, ent_vecs: np.ndarray, fact_vecs: np.ndarray, root: Path, warmup: int,
                 spec: dict[str, str], heap: str, pagecache: str) -> dict:
    from mnemobus.kernel.neo4j_local import LocalNeo4j

    if not GRAPHITI_PY.exists():
        raise SystemExit(f"{GRAPHITI_PY} is missing: run `make bench-graphiti` (it creates the Graphiti venv)")
    (root / "corpus.json").write_text(json.dumps({**corpus, "warmup": warmup, "embedder": spec}))
    np.save(root / "entity_vectors.npy", ent_vecs)
    np.save(root / "fact_vectors.npy", fact_vecs)
    with LocalNeo4j(heap=heap, pagecache=pagecache) as neo:
        assert neo.proc is not None
        print(f"    neo4j pid {neo.proc.pid} on {neo.uri} (heap {heap}, page cache {pagecache})", flush=True)
        # stderr passes through (progress lines); stdout is kept for the error message
        proc = subprocess.run([str(GRAPHITI_PY), str(BENCH_DIR / "graphiti_side.py"), str(root), neo.uri],
                              stdout=subprocess.PIPE, text=True, timeout=4 * 3600)
        rss = neo.rss_bytes()
        neo_peak = peak_rss_of(neo.proc.pid)
    if proc.returncode != 0:
        raise RuntimeError(f"graphiti side failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    out = json.loads((root / "graphiti_out.json").read_text())
    out["neo4j_rss_mb"] = round(rss / 2**20, 1) if rss else None
    out["neo4j_peak_rss_mb"] = neo_peak
    qv = root / "graphiti_query_vectors.npy"
    if qv.exists():
        out["query_vectors"] = dict(zip(out.pop("query_vector_texts"), np.load(qv), strict=True))
    return out


def vector_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> tuple[int, float | None]:
    """How many query texts both sides embedded, and the largest difference between their vectors."""
    common = [t for t in a if t in b]
    if not common:
        return 0, None
    return len(common), float(max(np.abs(np.asarray(a[t]) - np.asarray(b[t])).max() for t in common))


def print_misses(corpus: dict, mine: list[list[str]], theirs: list[list[str]], limit: int) -> None:
    """Queries Graphiti answers in its top 5 and mnemobus does not, with both top 5s."""
    facts = {f["id"]: f["fact"] for f in corpus["facts"]}
    shown = 0
    for q, m, g in zip(corpus["queries"], mine, theirs, strict=True):
        if shown >= limit or q["answer"] in m[:5] or q["answer"] not in g[:5]:
            continue
        shown += 1
        rank = m.index(q["answer"]) + 1 if q["answer"] in m else None
        print(f"\n  MISS {q['text']!r} -> {facts[q['answer']]!r} (mnemobus rank {rank})")
        for name, ids in (("mnemobus", m), ("graphiti", g)):
            print(f"    {name}: " + " | ".join(("*" if i == q["answer"] else "") + facts.get(i, i) for i in ids[:5]))


async def main() -> None:
    chosen = os.environ.get("BENCH_SIZES", "2k" if quick() else "10k").split(",")
    warmup = 20
    spec = embedder_spec()
    figures: dict = {"k": K, "embedder": spec["provider"], "embedder_model": spec["model"]}
    cache = Path(os.environ.get("BENCH_TMP", tempfile.gettempdir()))
    misses = int(os.environ.get("MISSES", "0"))
    for label in chosen:
        n_facts, n_groups, n_queries, heap, pagecache = SIZES[label]
        n_queries = int(os.environ.get("BENCH_QUERIES", n_queries))
        corpus = make_corpus(n_facts, n_groups, n_queries)
        t = time.perf_counter()
        ent_vecs, fact_vecs = embed_corpus(corpus, cache, spec)
        figures[f"{label}_embed_corpus_s"] = round(time.perf_counter() - t, 1)
        figures[f"{label}_facts"] = len(corpus["facts"])
        figures[f"{label}_entities"] = len(corpus["entities"])
        figures[f"{label}_groups"] = n_groups
        figures[f"{label}_queries"] = len(corpus["queries"])
        figures[f"{label}_embedder"] = spec["provider"]
        figures[f"{label}_neo4j_heap"], figures[f"{label}_neo4j_pagecache"] = heap, pagecache
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
            root = Path(tmp)
            results = await run_mnemobus(corpus, ent_vecs, fact_vecs, root, warmup, spec)
            mine_vectors = results.pop("query_vectors")
            figures[f"{label}_mnemobus_process_peak_rss_mb"] = peak_rss_of()
            print(f"  {label}: mnemobus done", flush=True)
            try:
                results["graphiti"] = run_graphiti(corpus, ent_vecs, fact_vecs, root, warmup, spec, heap, pagecache)
            except Exception as exc:  # the exact error goes into the results
                figures[f"{label}_graphiti_error"] = str(exc)[-2000:]
                print(f"  {label}: graphiti FAILED: {exc}", flush=True)
            print(f"  {label}: graphiti done", flush=True)
        for name, res in results.items():
            for key, value in latency_figures(res["latencies_s"]).items():
                figures[f"{label}_{name}_{key}"] = value
            for k in (5, 10):
                figures[f"{label}_{name}_recall@{k}"] = round(recall_of(res["retrieved"], corpus["queries"], k), 4)
            figures[f"{label}_{name}_load_s"] = res.get("load_s")
            figures[f"{label}_{name}_loadavg"] = res["load"]
        if "graphiti" in results:
            g = results["graphiti"]
            figures[f"{label}_graphiti_version"] = g.get("graphiti_core_version")
            figures[f"{label}_graphiti_embedder"] = g.get("embedder")
            figures[f"{label}_graphiti_errors"] = g.get("error_count", 0)
            if g.get("errors"):
                figures[f"{label}_graphiti_first_error"] = g["errors"][0]
            figures[f"{label}_graphiti_edges_in_neo4j"] = g.get("edges_in_neo4j")
            figures[f"{label}_graphiti_process_peak_rss_mb"] = g.get("peak_rss_mb")
            figures[f"{label}_neo4j_rss_mb"] = g.get("neo4j_rss_mb")
            figures[f"{label}_neo4j_peak_rss_mb"] = g.get("neo4j_peak_rss_mb")
            n_common, diff = vector_diff(mine_vectors, g.get("query_vectors", {}))
            figures[f"{label}_query_vectors_compared"] = n_common
            figures[f"{label}_query_vector_max_abs_diff"] = diff
            for recipe in RECIPES:
                for q in (50, 95, 99):
                    m = figures[f"{label}_mnemobus_{recipe}_p{q}_ms"]
                    figures[f"{label}_ratio_p{q}_graphiti_over_mnemobus_{recipe}"] = round(
                        figures[f"{label}_graphiti_p{q}_ms"] / m, 2)
            if misses:
                print_misses(corpus, results[f"mnemobus_{RECIPES[0]}"]["retrieved"], g["retrieved"], misses)
    # VmHWM of this process: mnemobus, its store and its embedder (Graphiti and Neo4j are other processes)
    figures["mnemobus_process_peak_rss_mb"] = peak_rss_of()
    merge = os.environ.get("BENCH_MERGE", "") not in ("", "0")
    earlier = result_path("bench_graphiti")
    counts = {**(json.loads(earlier.read_text()) if merge and earlier.exists() else {}), **figures}
    # one line for the report: the query count differs per size
    figures["queries"] = ", ".join(f"{counts[f'{label}_queries']} at {label}" for label in SIZES
                                   if f"{label}_queries" in counts)
    print_table("Graphiti vs mnemobus: search latency and evidence recall (same graph, same queries)", figures)
    write_results("bench_graphiti", figures,
                  baseline="Graphiti 0.31 search_ (EDGE_HYBRID_SEARCH_RRF, no LLM) on Neo4j 5.26, same facts/vectors",
                  merge=merge)


if __name__ == "__main__":
    asyncio.run(main())
