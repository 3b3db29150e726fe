"""LLM calls and tokens per episode: the LLM extractor beside Graphiti 0.31.1's add_episode, same local model server.

Run: `make bench-llm` (QUICK=1: Graphiti on 2 episodes instead of 5; GRAPHITI=0 skips it and reports the figure from
../shared/research/local-llm.md instead).

- The server: llama-cpp-python's OpenAI-compatible server (mnemobus/kernel/llama_local.py), SmolLM2-135M-Instruct Q4_1,
  n_ctx 8192 (Graphiti's extraction prompt alone is ~2.1k tokens), 1 thread; chat and mean-pooled embeddings.
- mnemobus: each episode through MemoryEngine.ingest (SQLite store, the OpenAI-compatible embedder on the same
  server), `extraction.llm` at its defaults except `structured_output: json_object_schema` (what llama.cpp
  enforces): one call per episode, candidates from the episodes before it in view. Calls and tokens are read from
  the extractor's own metrics (the endpoint's `usage`).
- Graphiti: bench/llm_graphiti_side.py in bench/.venv-graphiti, the same episodes in one group of the bench's
  local Neo4j, with the changes a llama.cpp server needs (see that file); every HTTP call counted.
- Same sentences, same reference times, one run. The model is tiny: figures of cost, not of quality.
- Quality, for the record: precision and recall of the model's own facts and endings on every 4th item of the
  held-out labelled set (QUICK: every 15th), scored as `make bench-extraction` scores the offline extractors; an
  answer the model could not give counts as nothing found (the fallback is switched off for this part).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

GRAPHITI_PY = BENCH_DIR / ".venv-graphiti" / "bin" / "python"
SENTENCES = [  # the everyday statements of the research note's Graphiti probe
    "I moved from Berlin to London last month.",
    "My sister Anna just started working at Siemens as an engineer.",
    "We adopted a dog called Max in 2021.",
    "I stopped drinking coffee, now it's only green tea.",
    "Next week I'm flying to Tokyo with Tom for a conference.",
]
T0 = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)
RESEARCH_BASELINE = ("Graphiti 0.31.1 add_episode against the same kind of server (../shared/research/local-llm.md): "
                     "2-8 chat calls (mean ~5) and ~4-8k prompt tokens (mean ~6k) per episode")


def mean(xs: list[float]) -> float:
    return round(statistics.fmean(xs), 1) if xs else float("nan")


async def run_mnemobus(url: str, model: str, root: Path) -> list[dict]:
    from mnemobus.shared.config import Settings
    from mnemobus.kernel.backends import open_engine
    from mnemobus.engine.llm import LlmMetrics
    from mnemobus.shared.groups import GroupId
    from mnemobus.kernel.llama_local import EMBEDDING_DIM
    from mnemobus.store.model import Episode

    settings = Settings(
        store={"sqlite_path": root / "bench.sqlite3"},
        memory={"embedding": {"provider": "openai", "openai": {"base_url": url, "model": model,
                                                               "dim": EMBEDDING_DIM}}},
        extraction={"extractor": "llm", "llm": {"base_url": url, "model": model, "timeout_s": 300,
                                                "structured_output": "json_object_schema"}})
    metrics = LlmMetrics()
    engine = await open_engine(settings, metrics)

    def read(name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, labels) or 0.0

    def snapshot() -> dict[str, float]:
        return {"chat": read("mnemobus_llm_calls_total", endpoint="chat", outcome="ok"),
                "embeddings": read("mnemobus_llm_calls_total", endpoint="embeddings", outcome="ok"),
                "prompt": read("mnemobus_llm_tokens_total", kind="prompt"),
                "completion": read("mnemobus_llm_tokens_total", kind="completion"),
                "fallbacks": sum(read("mnemobus_llm_fallbacks_total", reason=r) for r in
                                 ("budget", "unavailable", "timeout", "refused", "bad_response", "invalid_answer")),
                "invalid": read("mnemobus_llm_answers_total", outcome="invalid")}

    out = []
    try:
        for i, text in enumerate(SENTENCES):
            before = snapshot()
            started = time.perf_counter()
            outcome = await engine.ingest(Episode(f"b{i}", GroupId("bench_llm"), text, "user", f"m{i}",
                                                  T0 + timedelta(minutes=i)))
            after = snapshot()
            d = {k: after[k] - before[k] for k in after}
            out.append({"wall_s": round(time.perf_counter() - started, 1), "chat_calls": int(d["chat"]),
                        "embedding_calls": int(d["embeddings"]), "prompt_tokens": int(d["prompt"]),
                        "completion_tokens": int(d["completion"]), "fallbacks": int(d["fallbacks"]),
                        "invalid_answers": int(d["invalid"]), "facts_added": outcome.facts_added,
                        "entities": outcome.entities})
            print(f"    mnemobus episode {i}: {out[-1]}", flush=True)
    finally:
        await engine.close()
    return out


class _Nothing:
    """The quality run's fallback: an answer the model could not give counts as nothing found, so the scores are
    the model's own (the offline extractor would otherwise fill in for it)."""

    name = "none"

    async def extract(self, episode: object) -> object:
        from mnemobus.engine.extract import Extraction

        return Extraction()


async def run_quality(url: str, model: str, root: Path, stride: int) -> dict[str, object]:
    """Precision and recall on every `stride`-th item of the held-out labelled set (bench/extraction_set), scored
    as bench_extraction scores the offline extractors: endings through the engine (held facts stored first, so
    they are the model's candidates), facts from the same calls, one call per turn."""
    from bench_extraction import DATA, episodes_of, score_endings
    from extraction_score import Tally, Triple, load_items

    from mnemobus.shared.config import ExtractionSettings
    from mnemobus.engine.llm import LlmMetrics, LlmExtractor, build_extractor

    items = load_items(DATA / "report.yaml")[::stride]
    metrics = LlmMetrics()
    cfg = ExtractionSettings(extractor="llm", llm={"base_url": url, "model": model, "timeout_s": 300,
                                                   "structured_output": "json_object_schema"})
    extractor = build_extractor(cfg, _Nothing(), metrics)
    assert isinstance(extractor, LlmExtractor)
    seen: dict[str, object] = {}
    answer = extractor.extract_with

    async def recorded(episode, candidates):  # type: ignore[no-untyped-def]
        seen[episode.id] = got = await answer(episode, candidates)
        return got

    extractor.extract_with = recorded  # type: ignore[method-assign]
    tally = Tally()
    started = time.perf_counter()
    try:
        await score_endings(extractor, items, tally, root)
    finally:
        await extractor.aclose()
    for item in items:
        tally.add_facts(item, [(Triple(f.subject, f.relation, f.object), f.valid_from)
                               for ep in episodes_of(item, f"x_{item.id}") for f in seen[ep.id].facts])

    def read(name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, labels) or 0.0

    turns = len(seen)
    out: dict[str, object] = {f"quality_{k}": v for k, v in tally.figures().items()}
    out.update({"quality_items": len(items), "quality_turns": turns,
                "quality_fallbacks": int(read("mnemobus_llm_extractions_total", extractor="offline_fallback")),
                "quality_prompt_tokens_per_turn": mean([read("mnemobus_llm_tokens_total", kind="prompt") / turns]),
                "quality_wall_s_per_turn": mean([(time.perf_counter() - started) / turns])})
    return out


def run_graphiti(url: str, model: str, root: Path, n: int) -> dict:
    from mnemobus.kernel.neo4j_local import LocalNeo4j

    if not GRAPHITI_PY.exists():
        raise SystemExit(f"{GRAPHITI_PY} is missing: run `make bench-llm` (it creates the Graphiti venv)")
    spec_path, out_path = root / "graphiti_in.json", root / "graphiti_out.json"
    with LocalNeo4j() as neo:
        spec_path.write_text(json.dumps({
            "llm_url": url, "model": model, "neo4j_uri": neo.uri,
            "episodes": [{"content": s, "reference_time": (T0 + timedelta(minutes=i)).isoformat()}
                         for i, s in enumerate(SENTENCES[:n])]}))
        proc = subprocess.run([str(GRAPHITI_PY), str(BENCH_DIR / "llm_graphiti_side.py"), str(spec_path),
                               str(out_path)], stdout=subprocess.PIPE, text=True, timeout=4 * 3600)
    if proc.returncode != 0:
        raise RuntimeError(f"graphiti side failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    return json.loads(out_path.read_text())


def main() -> None:
    from mnemobus.kernel.llama_local import LocalLlama

    with_graphiti = os.environ.get("GRAPHITI", "1") not in ("0", "no", "false")
    n_graphiti = 2 if quick() else len(SENTENCES)
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="bench-llm-") as tmp, \
            LocalLlama(n_ctx=8192, log_path=Path(tmp) / "llama.log") as llama:
        root = Path(tmp)
        print(f"model server {llama.url} ({llama.model}, n_ctx 8192)", flush=True)
        ours = asyncio.run(run_mnemobus(llama.url, llama.model, root))
        quality = asyncio.run(run_quality(llama.url, llama.model, root, 15 if quick() else 4))
        theirs = run_graphiti(llama.url, llama.model, root, n_graphiti) if with_graphiti else None
    figures.update({
        "episodes": len(ours),
        "mnemobus_chat_calls_per_episode": mean([e["chat_calls"] for e in ours]),
        "mnemobus_chat_calls_max": max(e["chat_calls"] for e in ours),
        "mnemobus_prompt_tokens_per_episode": mean([e["prompt_tokens"] for e in ours]),
        "mnemobus_completion_tokens_per_episode": mean([e["completion_tokens"] for e in ours]),
        "mnemobus_embedding_calls_per_episode": mean([e["embedding_calls"] for e in ours]),
        "mnemobus_fallbacks": sum(e["fallbacks"] for e in ours),
        "mnemobus_invalid_answers": sum(e["invalid_answers"] for e in ours),
        "mnemobus_wall_s_per_episode": mean([e["wall_s"] for e in ours]),
        "mnemobus_facts_added": sum(e["facts_added"] for e in ours),
    })
    figures.update(quality)
    baseline = RESEARCH_BASELINE + " (not measured in this run: GRAPHITI=0)"
    if theirs is not None:
        eps = theirs["episodes"]
        g_prompt = mean([e["prompt_tokens"] for e in eps])
        figures.update({
            "graphiti_episodes": len(eps),
            "graphiti_failed_episodes": sum(1 for e in eps if e["error"]),
            "graphiti_chat_calls_per_episode": mean([e["chat_calls"] for e in eps]),
            "graphiti_chat_calls_max": max(e["chat_calls"] for e in eps),
            "graphiti_prompt_tokens_per_episode": g_prompt,
            "graphiti_completion_tokens_per_episode": mean([e["completion_tokens"] for e in eps]),
            "graphiti_embedding_calls_per_episode": mean([e["embedding_calls"] for e in eps]),
            "graphiti_wall_s_per_episode": mean([e["wall_s"] for e in eps]),
            "prompt_tokens_ratio_mnemobus_to_graphiti": round(figures["mnemobus_prompt_tokens_per_episode"]
                                                              / g_prompt, 3) if g_prompt else None,
        })
        g_all = g_prompt + figures["graphiti_completion_tokens_per_episode"]
        ours_all = figures["mnemobus_prompt_tokens_per_episode"] + figures["mnemobus_completion_tokens_per_episode"]
        figures["all_tokens_ratio_mnemobus_to_graphiti"] = round(ours_all / g_all, 3) if g_all else None
        figures["graphiti_prompts"] = [e["prompts"] for e in eps]
        baseline = (f"Graphiti {theirs['graphiti_core_version']} add_episode on the first {len(eps)} of the same "
                    "episodes, same server, same run (bench/llm_graphiti_side.py)")
        ratio = figures["prompt_tokens_ratio_mnemobus_to_graphiti"]
        figures["target_met"] = bool(figures["mnemobus_chat_calls_max"] <= 1 and ratio is not None and ratio <= 0.25)
    figures["mnemobus_episodes_detail"] = ours
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("LLM calls and tokens per episode (SmolLM2-135M on llama-cpp-python, 1 thread)", figures)
    write_results("bench_llm", figures, baseline)


if __name__ == "__main__":
    main()
