"""An embedder over any OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama, llama.cpp, gateways).

Synchronous like every Embedder (the engine calls it on a worker thread). Texts go
in batches of `batch_size` per call; each call has a timeout and is retried on 429,
5xx, timeouts and transport errors like the chat calls. Every vector must have the
configured dimension: the store's indexes are built for it, so a model that answers
otherwise is refused with a message that says which key to change, never stored.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from mnemobus.engine.embed import _normalise
from mnemobus.engine.llm.endpoint import Endpoint, EndpointError, RetryPolicy
from mnemobus.shared.metrics import LlmMetrics
from mnemobus.shared.errors import ConfigError


class EmbeddingDimensionMismatch(ConfigError):
    """The endpoint's vectors do not have the configured dimension."""


class OpenAIEmbedder:
    def __init__(self, base_url: str, model: str, dim: int, *, api_key: str | None = None, batch_size: int = 64,
                 timeout_s: float = 30.0, connect_timeout_s: float = 5.0, retry: RetryPolicy | None = None,
                 metrics: LlmMetrics | None = None, dim_key: str = "memory.embedding.openai.dim") -> None:
        self.name = f"openai:{model}"
        self.model = model
        self.dim = dim
        self.batch_size = batch_size
        self.dim_key = dim_key
        self.metrics = metrics or LlmMetrics()
        self.endpoint = Endpoint(base_url, "/embeddings", label="embeddings", api_key=api_key, timeout_s=timeout_s,
                                 connect_timeout_s=connect_timeout_s, retry=retry or RetryPolicy(),
                                 metrics=self.metrics)
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, dim={self.dim}, endpoint={self.endpoint!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.endpoint.timeout)
            client = self._client
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            # an empty string is refused by some servers; its vector is the zero row the protocol promises
            wanted = [i for i, t in enumerate(batch) if t.strip()]
            if not wanted:
                continue
            data = self.endpoint.post_sync(client, {"model": self.model, "input": [batch[i] for i in wanted]})
            out[[start + i for i in wanted]] = self._vectors(data, len(wanted))
        return _normalise(out)

    def _vectors(self, data: dict[str, Any], expected: int) -> np.ndarray:
        rows = data.get("data")
        if not isinstance(rows, list) or len(rows) != expected:
            got = len(rows) if isinstance(rows, list) else type(rows).__name__
            raise EndpointError("bad_response", f"asked for {expected} embeddings, the answer holds {got}")
        try:
            ordered = sorted(rows, key=lambda r: r.get("index", 0))
            vectors = [r["embedding"] for r in ordered]
        except (AttributeError, KeyError, TypeError) as exc:
            raise EndpointError("bad_response", f"an item of data has no embedding ({exc!r})") from exc
        if vectors and isinstance(vectors[0], list) and vectors[0] and isinstance(vectors[0][0], list):
            raise EmbeddingDimensionMismatch(
                f"{self.dim_key}: the endpoint {self.endpoint.url} answered one vector per token, not one per text: "
                "the server does not pool this model's embeddings (llama.cpp: start it with mean pooling, "
                "see deploy/llama/serve.py)")
        try:
            matrix = np.asarray(vectors, dtype=np.float32)
        except ValueError as exc:
            raise EndpointError("bad_response", f"the embeddings are not numbers of one length ({exc})") from exc
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            got = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise EmbeddingDimensionMismatch(
                f"{self.dim_key}: the model {self.model!r} at {self.endpoint.url} returns {got}-dimensional vectors, "
                f"the config says {self.dim}; set {self.dim_key}: {got} (a store built for another dimension needs a "
                "re-embed or a fresh store)")
        return matrix

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
