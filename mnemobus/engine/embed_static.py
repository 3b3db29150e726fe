"""A static embedder distilled, on this machine, from the local transformer model.

The transformer costs ~4 ms a sentence on these 2 cores, which caps ingestion
far below what a memory layer needs. A static model answers in microseconds:
each WordPiece token gets one vector (the transformer's output for that token
alone), a sentence is the mean of its tokens' vectors. Mean-centring the token
table removes the direction every token shares, which is what makes unrelated
sentences score near zero. The table is built from the installed ONNX weights
(no download), once per cache directory (a file lock makes a second process wait for the first's build),
and cached as a .npy file beside the data.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mnemobus.engine.embed import DIM, LocalOnnxEmbedder
from mnemobus.engine.wordpiece import PlainWordPiece

log = logging.getLogger("mnemobus.embed")

_SPECIAL = (0, 100, 101, 102, 103)  # [PAD] [UNK] [CLS] [SEP] [MASK] in the BERT uncased vocabulary
_BATCH = 1024
_FORMAT = 1  # bump when the distillation changes, so an old table is rebuilt


class StaticEmbedder:
    """Thread-safe; the token table is loaded (or built) on first use."""

    dim = DIM

    def __init__(self, model: str, cache_dir: Path | str) -> None:
        self.name = f"{model}-static"
        self.model, self.cache_dir = model, Path(cache_dir)  # what another process needs to load the same table
        # the table is built once, so let the teacher use every core while it does
        self._teacher = LocalOnnxEmbedder(model, threads=os.cpu_count() or 1)
        self._path = Path(cache_dir) / f"{model}-static-v{_FORMAT}.npy"
        self._lock = threading.Lock()
        self._table: np.ndarray | None = None
        self._tokenizer = None
        self._plain: PlainWordPiece | None = None

    @property
    def table_path(self) -> Path:
        return self._path

    def _load(self) -> None:
        self._tokenizer = self._teacher.load_tokenizer()
        self._plain = PlainWordPiece.for_tokenizer(self._teacher.tokenizer_path, self._teacher.max_tokens)
        if not self._path.exists():
            self._path.parent.mkdir(parents=True, exist_ok=True)
            # one build per cache directory, whichever process gets there first: another one waits for its file
            with self._path.with_suffix(".lock").open("a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not self._path.exists():
                    self._build()
        # the transformer itself is never loaded when the table is there: it would hold ~200 MB for nothing
        self._table = np.load(self._path, mmap_mode=None)

    def _build(self) -> None:
        started = time.perf_counter()
        log.warning("building the static embedding table from %s into %s (once per cache directory; 20 s to a "
                    "few minutes on 2 cores, progress follows)", self._teacher.name, self._path)
        table = distil(self._teacher, progress=lambda done, total: log.info(
            "static embedding table: %d%% (%d of %d tokens, %.0f s)", 100 * done // total, done, total,
            time.perf_counter() - started))
        tmp = self._path.with_suffix(".tmp.npy")
        np.save(tmp, table)
        tmp.replace(self._path)
        log.info("built the static embedding table %s in %.0f s", self._path, time.perf_counter() - started)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._table is None:
                self._load()
        table = self._table
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, ids in enumerate(self._token_ids(texts)):
            if ids:
                out[row] = table[ids].mean(axis=0)  # type: ignore[index]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)

    def _token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, specials left out: plain ASCII by the fast path, the rest by the library."""
        plain = self._plain
        found = [plain.ids(t) if plain is not None else None for t in texts]
        rest = [i for i, ids in enumerate(found) if ids is None]
        if rest:
            for i, enc in zip(rest, self._tokenizer.encode_batch([texts[i] for i in rest])):  # type: ignore[union-attr]
                found[i] = enc.ids
        return [[i for i in ids if i not in _SPECIAL] for ids in found]  # type: ignore[union-attr]


def distil(teacher: LocalOnnxEmbedder, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """One vector per vocabulary token: the teacher's output for `[CLS] token [SEP]`, mean-centred;
    `progress(done, total)` hears of every tenth of the vocabulary."""
    teacher._load()
    session, tokenizer = teacher._session, teacher._tokenizer
    size = tokenizer.get_vocab_size()  # type: ignore[union-attr]
    table = np.zeros((size, DIM), dtype=np.float32)
    for start in range(0, size, _BATCH):
        ids = np.arange(start, min(size, start + _BATCH), dtype=np.int64)
        batch = np.stack([np.full(len(ids), 101), ids, np.full(len(ids), 102)], axis=1).astype(np.int64)
        hidden = session.run(None, {"input_ids": batch, "attention_mask": np.ones_like(batch),  # type: ignore[union-attr]
                                    "token_type_ids": np.zeros_like(batch)})[0]
        table[ids] = hidden[:, 1, :]
        done = start + len(ids)
        if progress is not None and (done * 10 // size) > (start * 10 // size):
            progress(done, size)
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-9)
    table -= table[1000:].mean(axis=0)  # ids below ~1000 are unused and special entries
    table /= np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-9)
    return table
