"""The Graphiti half of bench_graphiti.py; runs inside bench/.venv-graphiti (graphiti-core used as a library).

Usage (bench_graphiti.py does this): bench/.venv-graphiti/bin/python bench/graphiti_side.py <corpus dir> <neo4j uri>

Reads the corpus the other half wrote (entities, facts, episodes, their vectors from the
chosen embedder, the queries), loads it into Neo4j as Graphiti EntityNode / EntityEdge /
EpisodicNode objects through graphiti-core's own bulk writer, in batches (no LLM: nothing is
extracted, every vector is given), then times Graphiti's own search (`Graphiti.search_` with the
EDGE_HYBRID_SEARCH_RRF recipe: BM25 + cosine over facts, RRF, no cross-encoder) on the same
queries and groups, the query embedded by an EmbedderClient that wraps the same embedder code
mnemobus uses: mnemobus/engine/embed.py, wordpiece.py and embed_static.py, loaded by path (registered under
their own module names, so embed_static's `from mnemobus.engine.embed import ...` finds the
by-path module and the engine package, with its dependencies, is never imported), built by
bench_graphiti.make_bench_embedder from the same spec. Writes <corpus dir>/graphiti_out.json
and the vector of every query it embedded to graphiti_query_vectors.npy.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import sys
import time
from datetime import datetime
from pathlib import Path

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
os.environ.setdefault("OPENAI_API_KEY", "unused-no-llm-calls")  # the default clients want a key at construction
# Graphiti's queries read `e.reference_time`, which bulk-written edges lack: one server warning per search
logging.getLogger("neo4j.notifications").setLevel(logging.ERROR)
# build_indices_and_constraints creates its indexes side by side and logs each race it loses ("an equivalent
# index already exists"): harmless, and 30 multi-line errors per run would bury the bench's own output
logging.getLogger("graphiti_core.driver.neo4j_driver").addFilter(
    lambda record: "EquivalentSchemaRuleAlreadyExists" not in record.getMessage())

import numpy as np  # noqa: E402
from graphiti_core import Graphiti  # noqa: E402
from graphiti_core.cross_encoder.client import CrossEncoderClient  # noqa: E402
from graphiti_core.edges import EntityEdge  # noqa: E402
from graphiti_core.embedder.client import EmbedderClient  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode  # noqa: E402
from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF  # noqa: E402
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from bench_graphiti import make_bench_embedder, peak_rss_of  # noqa: E402  (numpy and bench/common only)

BATCH = 2000  # facts (and their episodes) per bulk write: one transaction each


def _load_by_path(name: str, relative: str):  # type: ignore[no-untyped-def]
    """One project module from its file, registered under its own name (before it runs, as imports expect)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_embed_modules():  # type: ignore[no-untyped-def]
    """mnemobus/engine/embed.py, wordpiece.py, embed_static.py and embedders.py by path: the very same code, without the engine package.

    `mnemobus` itself (a docstring and a version) and `mnemobus.shared.errors` (no imports) come from the
    project folder; `mnemobus.engine` is never imported, because both modules are in sys.modules first.
    """
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    _load_by_path("mnemobus.engine.embed", "mnemobus/engine/embed.py")
    _load_by_path("mnemobus.engine.wordpiece", "mnemobus/engine/wordpiece.py")  # embed_static's tokenizer
    _load_by_path("mnemobus.engine.embed_static", "mnemobus/engine/embed_static.py")
    return _load_by_path("mnemobus.engine.embedders", "mnemobus/engine/embedders.py")


class MnemobusEmbedderClient(EmbedderClient):
    """Graphiti's embedder interface over the embedder mnemobus uses in this run (static or local, 384-d)."""

    def __init__(self, spec: dict[str, str]) -> None:
        self.model = make_bench_embedder(spec, load_embed_modules().make_embedder)
        self.vectors: dict[str, np.ndarray] = {}  # every query embedded, to compare with the mnemobus side

    async def create(self, input_data) -> list[float]:  # type: ignore[override]
        text = str(input_data if isinstance(input_data, str) else list(input_data)[0])
        vec = self.model.embed([text])[0]
        self.vectors[text] = vec
        return vec.tolist()

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return self.model.embed(list(input_data_list)).tolist()


class NoReranker(CrossEncoderClient):
    """Never called with the RRF recipe; present so Graphiti builds no OpenAI reranker."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        raise RuntimeError("the bench uses no cross-encoder")


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


async def main(corpus: Path, uri: str) -> None:
    meta = json.loads((corpus / "corpus.json").read_text())
    ent_vecs = np.load(corpus / "entity_vectors.npy")
    fact_vecs = np.load(corpus / "fact_vectors.npy")
    embedder = MnemobusEmbedderClient(meta["embedder"])
    embedder.model.embed(["warm up"])
    graphiti = Graphiti(uri, "neo4j", "unused", embedder=embedder, cross_encoder=NoReranker())
    out: dict = {"graphiti_core_version": __import__("importlib.metadata").metadata.version("graphiti-core"),
                 "embedder": f"{meta['embedder']['provider']}:{embedder.model.name}"}
    try:
        t = time.perf_counter()
        await graphiti.build_indices_and_constraints()
        await graphiti.driver.execute_query("CALL db.awaitIndexes(300)")
        out["indices_s"] = round(time.perf_counter() - t, 2)

        created = datetime.fromisoformat(meta["now"])

        def entity(i: int, e: dict) -> EntityNode:
            return EntityNode(uuid=e["id"], name=e["name"], group_id=e["group"], labels=["Entity"],
                              name_embedding=ent_vecs[i].tolist(), summary="", created_at=created)

        def episode(f: dict) -> EpisodicNode:
            return EpisodicNode(uuid=f["episode_id"], name=f["episode_id"], group_id=f["group"],
                                source=EpisodeType.message, source_description="bench",
                                content=f"user: {f['fact']}", valid_at=_dt(f["valid_at"]) or created,
                                created_at=created, entity_edges=[f["id"]])

        def edge(i: int, f: dict) -> EntityEdge:
            return EntityEdge(uuid=f["id"], group_id=f["group"], source_node_uuid=f["subject_id"],
                              target_node_uuid=f["object_id"], name=f["relation"], fact=f["fact"],
                              fact_embedding=fact_vecs[i].tolist(), episodes=[f["episode_id"]],
                              valid_at=_dt(f["valid_at"]), invalid_at=None, created_at=created)

        # built batch by batch: 100k edges as pydantic objects with 384 Python floats each would hold ~1.5 GB
        t = time.perf_counter()
        ents, facts = meta["entities"], meta["facts"]
        for i in range(0, len(ents), BATCH):
            batch = [entity(j, e) for j, e in enumerate(ents[i : i + BATCH], start=i)]
            await add_nodes_and_edges_bulk(graphiti.driver, [], [], batch, [], embedder)
        for i in range(0, len(facts), BATCH):
            part = facts[i : i + BATCH]
            await add_nodes_and_edges_bulk(graphiti.driver, [episode(f) for f in part], [], [],
                                           [edge(j, f) for j, f in enumerate(part, start=i)], embedder)
            if (i // BATCH) % 10 == 9:
                print(f"    graphiti: {i + len(part)} / {len(facts)} facts written, {time.perf_counter() - t:.0f} s",
                      file=sys.stderr, flush=True)
        await graphiti.driver.execute_query("CALL db.awaitIndexes(600)")
        out["load_s"] = round(time.perf_counter() - t, 2)
        records, _, _ = await graphiti.driver.execute_query("MATCH ()-[e:RELATES_TO]->() RETURN count(e) AS n")
        out["edges_in_neo4j"] = records[0]["n"]

        config = EDGE_HYBRID_SEARCH_RRF.model_copy(update={"limit": meta["k"]})  # a copy: the recipe is shared
        queries = meta["queries"]
        for q in queries[: meta["warmup"]]:
            await graphiti.search_(q["text"], config=config, group_ids=[q["group"]])
        latencies, retrieved, errors = [], [], []
        load0 = os.getloadavg()[0]
        for q in queries:
            t = time.perf_counter()
            try:
                res = await graphiti.search_(q["text"], config=config, group_ids=[q["group"]])
                ids = [e.uuid for e in res.edges]
            except Exception as exc:  # report, don't hide
                errors.append(f"{type(exc).__name__}: {exc}")
                ids = []
            latencies.append(time.perf_counter() - t)
            retrieved.append(ids)
        out.update(latencies_s=latencies, retrieved=retrieved, errors=errors[:5], error_count=len(errors),
                   load=round((load0 + os.getloadavg()[0]) / 2, 2))
    finally:
        await graphiti.close()
    texts = list(embedder.vectors)
    out["query_vector_texts"] = texts
    np.save(corpus / "graphiti_query_vectors.npy", np.array([embedder.vectors[t] for t in texts], dtype=np.float32)
            .reshape(len(texts), -1))
    out["peak_rss_mb"] = peak_rss_of()  # the Graphiti client: its objects, the driver, the embedder
    (corpus / "graphiti_out.json").write_text(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
