"""The blind set through the LLM extractor with the only model this machine has: what the wire reaches.

Run: `make bench-extraction-llm` (needs `make llama-server`; BLIND_DIR names another folder of labelled files;
STRIDE=n scores every n-th item of each file, default 1: on 2 shared cores a call of the one-thread server took
~50 s at load 21, so the whole set, ~700 calls, does not fit a working session; the stride is in the results).

The issue's bars (bench/extraction_set/blind/, end to end through POST /messages) are out of the offline rules'
reach; this measures the other path exactly as `make bench-extraction` measures the offline one (the same
bench/extraction_blind.py scoring, the same service), with `extraction.extractor: llm` on the local model server
(mnemobus/kernel/llama_local.py: SmolLM2-135M-Instruct Q4_1, one thread, `structured_output: json_object_schema`).
The per-episode fallback to the offline extractor is switched off (bench_llm._Nothing), so the figures are the
model's own; an answer it could not give counts as nothing found, and their number is reported
(`llm_fallbacks`). Only aggregate figures are printed and written (bench/results/bench_extraction_llm.json).
Baseline: the offline extractor's blind figures in bench/results/bench_extraction_blind.json (run apart: the blind
set is run once per rule state).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_extraction import blind_figures  # noqa: E402
from bench_llm import _Nothing  # noqa: E402
from common import peak_rss_mb, print_table, write_results  # noqa: E402

N_CTX = 8192
STRIDE = int(os.environ.get("STRIDE", "1"))


async def run(url: str, model: str, root: Path) -> dict[str, Any]:
    from mnemobus.engine.llm import LlmExtractor

    holder: dict[str, Any] = {}

    def without_fallback(svc: Any) -> None:
        extractor = svc.rt.engine.extractor
        assert isinstance(extractor, LlmExtractor), type(extractor)
        extractor.fallback = _Nothing()  # type: ignore[assignment]
        holder["metrics"] = extractor.metrics

    started = time.perf_counter()
    figures = await blind_figures(root, {"extraction": {"extractor": "llm", "llm": {
        "base_url": url, "model": model, "timeout_s": 600, "structured_output": "json_object_schema"}}},
        without_fallback, STRIDE)
    out: dict[str, Any] = {"llm_stride": STRIDE, **{f"llm_{k}": v for k, v in figures.items()}}
    metrics = holder.get("metrics")
    if metrics is not None:
        def read(name: str, **labels: str) -> float:
            return metrics.registry.get_sample_value(name, labels) or 0.0

        out["llm_chat_calls"] = int(read("mnemobus_llm_calls_total", endpoint="chat", outcome="ok"))
        out["llm_fallbacks"] = int(read("mnemobus_llm_extractions_total", extractor="offline_fallback"))
    out["llm_wall_s"] = round(time.perf_counter() - started, 1)
    return out


def main() -> None:
    from mnemobus.kernel.llama_local import LocalLlama

    with tempfile.TemporaryDirectory(prefix="bench-extraction-llm-") as tmp, \
            LocalLlama(n_ctx=N_CTX, log_path=Path(tmp) / "llama.log") as llama:
        print(f"model server {llama.url} ({llama.model}, n_ctx {N_CTX})", flush=True)
        figures = asyncio.run(run(llama.url, llama.model, Path(tmp)))
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("The blind set through the LLM extractor (SmolLM2-135M, no offline fallback)", figures)
    write_results("bench_extraction_llm", figures, baseline="the offline extractor on the same blind set: "
                  "bench/results/bench_extraction_blind.json (run apart)")


if __name__ == "__main__":
    main()
