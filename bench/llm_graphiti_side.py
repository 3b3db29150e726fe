"""The Graphiti half of bench_llm.py: LLM calls and tokens per episode of Graphiti 0.31.1's add_episode, against
the same local model server. Runs inside bench/.venv-graphiti (graphiti-core used as a library).

Usage (bench_llm.py does this): bench/.venv-graphiti/bin/python bench/llm_graphiti_side.py <in.json> <out.json>
in.json: {"llm_url", "model", "neo4j_uri", "episodes": [{"content", "reference_time"}]}

Wiring (see ../shared/research/local-llm.md, section 4): OpenAIGenericClient with two changes a llama.cpp server
needs, as in that note's probe: `response_format` sent as {"type": "json_object", "schema": ...} (the server answers
HTTP 500 to json_schema), the schema bounded (maxItems 5 per array, maxLength 80 per string, or the tiny model loops
to max_tokens) and max_tokens capped at 1024 (extract_edges asks for 16384). Embeddings from the same server
(mean-pooled), a no-op cross-encoder (add_episode does not use one), the graph in the bench's local Neo4j. Every HTTP
call is counted with httpx event hooks; tokens are read from each answer's `usage`; each chat call is attributed
to the Graphiti prompt that made it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import sys
import time
from datetime import datetime
from typing import Any

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
# as in graphiti_side.py: Graphiti's queries read properties its edges may lack (a server warning per query), and
# build_indices_and_constraints logs each index race it loses; neither says anything about calls or tokens
logging.getLogger("neo4j.notifications").setLevel(logging.ERROR)
logging.getLogger("graphiti_core.driver.neo4j_driver").addFilter(
    lambda record: "EquivalentSchemaRuleAlreadyExists" not in record.getMessage())

import httpx  # noqa: E402
from graphiti_core import Graphiti  # noqa: E402
from graphiti_core.cross_encoder.client import CrossEncoderClient  # noqa: E402
from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig  # noqa: E402
from graphiti_core.llm_client.config import LLMConfig  # noqa: E402
from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient  # noqa: E402
from graphiti_core.nodes import EpisodeType  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

MAX_TOKENS = 1024
_prompt: contextvars.ContextVar[str] = contextvars.ContextVar("prompt", default="?")


def bounded(schema: Any) -> Any:
    """Every array gets maxItems 5 and every free string maxLength 80 (a tiny model otherwise loops)."""
    if isinstance(schema, dict):
        out = {k: bounded(v) for k, v in schema.items()}
        if out.get("type") == "array":
            out.setdefault("maxItems", 5)
        if out.get("type") == "string" and "enum" not in out and "format" not in out:
            out.setdefault("maxLength", 80)
        return out
    if isinstance(schema, list):
        return [bounded(v) for v in schema]
    return schema


class LocalLlamaClient(OpenAIGenericClient):
    def _build_response_format(self, response_model):  # type: ignore[no-untyped-def]
        if response_model is None:
            return {"type": "json_object"}
        return {"type": "json_object", "schema": bounded(response_model.model_json_schema())}

    async def _generate_response(self, messages, response_model=None, max_tokens=MAX_TOKENS, model_size=None,
                                 **kw):  # type: ignore[no-untyped-def]
        if model_size is not None:
            kw["model_size"] = model_size
        return await super()._generate_response(messages, response_model, min(max_tokens or MAX_TOKENS, MAX_TOKENS),
                                                **kw)

    async def generate_response(self, *args, prompt_name=None, **kw):  # type: ignore[no-untyped-def]
        token = _prompt.set(prompt_name or "?")
        try:
            return await super().generate_response(*args, prompt_name=prompt_name, **kw)
        finally:
            _prompt.reset(token)


class NoReranker(CrossEncoderClient):
    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        return [(p, 1.0) for p in passages]


class Counter:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def on_response(self, response: httpx.Response) -> None:
        await response.aread()
        kind = "chat" if response.request.url.path.endswith("/chat/completions") else "embeddings"
        usage: dict[str, Any] = {}
        try:
            usage = response.json().get("usage") or {}
        except ValueError:
            pass
        self.calls.append({"kind": kind, "status": response.status_code, "prompt": _prompt.get(),
                           "prompt_tokens": int(usage.get("prompt_tokens") or 0),
                           "completion_tokens": int(usage.get("completion_tokens") or 0)})


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    counter = Counter()
    http = httpx.AsyncClient(timeout=600, event_hooks={"response": [counter.on_response]})
    oai = AsyncOpenAI(base_url=spec["llm_url"], api_key="unused", http_client=http, max_retries=0)
    cfg = LLMConfig(base_url=spec["llm_url"], api_key="unused", model=spec["model"], small_model=spec["model"],
                    temperature=0)
    llm = LocalLlamaClient(cfg, client=oai, max_tokens=MAX_TOKENS)
    emb = OpenAIEmbedder(OpenAIEmbedderConfig(embedding_model=spec["model"], base_url=spec["llm_url"],
                                              api_key="unused"), client=oai)
    graphiti = Graphiti(spec["neo4j_uri"], "neo4j", "unused", llm_client=llm, embedder=emb,
                        cross_encoder=NoReranker())
    await graphiti.build_indices_and_constraints()
    episodes = []
    try:
        for i, ep in enumerate(spec["episodes"]):
            before = len(counter.calls)
            started = time.perf_counter()
            error = None
            try:
                await graphiti.add_episode(name=f"msg{i}", episode_body=ep["content"], source_description="chat",
                                           reference_time=datetime.fromisoformat(ep["reference_time"]),
                                           source=EpisodeType.message, group_id="bench_llm")
            except Exception as exc:  # noqa: BLE001 - a failed episode is a figure too
                error = f"{type(exc).__name__}: {str(exc)[:200]}"
            calls = counter.calls[before:]
            chat = [c for c in calls if c["kind"] == "chat"]
            episodes.append({
                "wall_s": round(time.perf_counter() - started, 1), "error": error,
                "chat_calls": len(chat), "embedding_calls": len(calls) - len(chat),
                "prompt_tokens": sum(c["prompt_tokens"] for c in chat),
                "completion_tokens": sum(c["completion_tokens"] for c in chat),
                "prompts": [c["prompt"] for c in chat],
            })
            print(f"    graphiti episode {i}: {episodes[-1]}", file=sys.stderr, flush=True)
    finally:
        await graphiti.close()
        await http.aclose()
    return {"episodes": episodes,
            "graphiti_core_version": __import__("importlib.metadata").metadata.version("graphiti-core")}


if __name__ == "__main__":
    spec_in = json.loads(open(sys.argv[1]).read())
    result = asyncio.run(main(spec_in))
    with open(sys.argv[2], "w") as f:
        json.dump(result, f, indent=2)
