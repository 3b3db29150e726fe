"""The Graphiti half of bench_graphiti.py; runs inside bench/.venv-graphiti (graphiti-core used as a library).

Usage (bench_graphiti.py does this): bench/.venv-graphiti/bin/python bench/graphiti_side.py <corpus dir> <neo4j uri>

Reads the corpus the other half wrote (entities, facts, episodes, their vectors from the
local ONNX model, the queries), loads it into Neo4j as Graphiti EntityNode / EntityEdge /
EpisodicNode objects through graphiti-core's own bulk writer (no LLM: nothing is extracted,
every vector is given), then times Graphiti's own search (`Graphiti.search_` with the
EDGE_HYBRID_SEARCH_RRF recipe: BM25 + cosine over facts, RRF, no cross-encoder) on the same
queries and groups, the query embedded by an EmbedderClient that wraps the same ONNX model
code mnemobus uses (mnemobus/engine/embed.py, loaded by path so no project dependency is
needed here). Writes <corpus dir>/graphiti_out.json.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
os.environ.setdefault("OPENAI_API_KEY", "unused-no-llm-calls")  # the default clients want a key at construction

import numpy as np  # noqa: E402
from graphiti_core import Graphiti  # noqa: E402
from graphiti_core.cross_encoder.client import CrossEncoderClient  # noqa: E402
from graphiti_core.edges import EntityEdge  # noqa: E402
from graphiti_core.embedder.client import EmbedderClient  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode  # noqa: E402
from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF  # noqa: E402
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _load_embed_module():
    """mnemobus/engine/embed.py by path: the very same model code, without importing the engine package."""
    sys.path.insert(0, str(ROOT))  # for `mnemobus.errors`, which imports nothing
    spec = importlib.util.spec_from_file_location("mnemobus_embed_for_graphiti", ROOT / "mnemobus/engine/embed.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


class LocalOnnxEmbedderClient(EmbedderClient):
    """Graphiti's embedder interface over mnemobus's LocalOnnxEmbedder (all-MiniLM-L6-v2 int8, 384-d)."""

    def __init__(self) -> None:
        self.model = _load_embed_module().LocalOnnxEmbedder()

    async def create(self, input_data) -> list[float]:  # type: ignore[override]
        text = input_data if isinstance(input_data, str) else list(input_data)[0]
        return self.model.embed([str(text)])[0].tolist()

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
    embedder = LocalOnnxEmbedderClient()
    embedder.model.embed(["warm up"])
    graphiti = Graphiti(uri, "neo4j", "unused", embedder=embedder, cross_encoder=NoReranker())
    out: dict = {"graphiti_core_version": __import__("importlib.metadata").metadata.version("graphiti-core")}
    try:
        t = time.perf_counter()
        await graphiti.build_indices_and_constraints()
        await graphiti.driver.execute_query("CALL db.awaitIndexes(300)")
        out["indices_s"] = round(time.perf_counter() - t, 2)

        created = datetime.fromisoformat(meta["now"])
        entities = [EntityNode(uuid=e["id"], name=e["name"], group_id=e["group"], labels=["Entity"],
                               name_embedding=ent_vecs[i].tolist(), summary="", created_at=created)
                    for i, e in enumerate(meta["entities"])]
        episodes = [EpisodicNode(uuid=f["episode_id"], name=f["episode_id"], group_id=f["group"],
                                 source=EpisodeType.message, source_description="bench",
                                 content=f"user: {f['fact']}", valid_at=_dt(f["valid_at"]) or created,
                                 created_at=created, entity_edges=[f["id"]])
                    for f in meta["facts"]]
        edges = [EntityEdge(uuid=f["id"], group_id=f["group"], source_node_uuid=f["subject_id"],
                            target_node_uuid=f["object_id"], name=f["relation"], fact=f["fact"],
                            fact_embedding=fact_vecs[i].tolist(), episodes=[f["episode_id"]],
                            valid_at=_dt(f["valid_at"]), invalid_at=None, created_at=created)
                 for i, f in enumerate(meta["facts"])]
        t = time.perf_counter()
        await add_nodes_and_edges_bulk(graphiti.driver, [], [], entities, [], embedder)
        step = 1000
        for i in range(0, len(edges), step):
            await add_nodes_and_edges_bulk(graphiti.driver, episodes[i : i + step], [], [], edges[i : i + step], embedder)
        await graphiti.driver.execute_query("CALL db.awaitIndexes(300)")
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
    (corpus / "graphiti_out.json").write_text(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
