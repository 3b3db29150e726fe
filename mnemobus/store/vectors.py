"""Backend-neutral pieces of in-process vector search: a growable float32 matrix, top-k selection, the IVF index.

Why a module of its own: both stores keep embeddings in memory and search them
with one matrix product (SQLite in `sqlite/vectors.py`, Neo4j in `neo4j/mirror.py`),
and the two must rank the same way. Nothing here knows where rows come from.
"""

from __future__ import annotations

import functools
import logging
import math

import numpy as np
import threadpoolctl

log = logging.getLogger(__name__)

ANN_MIN_ROWS = 5_000  # below this an exact scan is cheaper than building and probing an index (docs/performance.md)
RESCORE_FACTOR = 4  # candidates per wanted result where a filter drops some after the search (the Neo4j mirror)


def grown(array: np.ndarray | None, size: int, need: int, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """`array` with room for `need` rows, its first `size` rows kept; the same array when it already fits.

    Grows by a quarter at a time: appends one episode's rows at a time would otherwise copy the matrix each time.
    The first allocation (a group read from the file whole) is exact: its quarter of room was a fifth of the
    cache's budget, so a group of 100k facts and 100k turns no longer fitted the default budget with its two
    indexes, and recall scanned while the cache evicted and rebuilt them (docs/performance.md, issue 37).
    """
    if array is not None and need <= array.shape[0]:
        return array
    capacity = need if array is None else max(need, 64, int(need * 1.25))
    out = np.empty((capacity, *shape), dtype=dtype)
    if array is not None and size:
        out[:size] = array[:size]
    return out


def top_k(sims: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest scores, highest first (argpartition: k is small, a full sort is not)."""
    if k <= 0 or not len(sims):
        return np.empty(0, dtype=np.int64)
    if k < len(sims):
        top = np.argpartition(-sims, k)[:k]
        return top[np.argsort(-sims[top])]
    return np.argsort(-sims)


@functools.cache
def single_threaded_blas() -> None:
    """One BLAS thread per search: concurrency comes from the reader threads, and a multi-threaded gemv
    oversubscribes busy cores; single-threaded BLAS still beats numpy's einsum loop (docs/performance.md)."""
    threadpoolctl.threadpool_limits(limits=1, user_api="blas")


def probes(nlist: int) -> int:
    """Lists a search reads: twice the square root of the lists, which finds 0.94 of the true top 10 at 10k and at
    50k rows of real English (bench/bench_vector_index.py), where a 32nd of the lists (at least 8) found 0.76 at
    10k and 0.87 at 50k, unmeasured until 2026-11-29. It costs 32 us more a search at 10k, 92 at 50k: ~0.3 ms
    more CPU an enriched request on the plugin bench (four indexed searches; docs/performance.md)."""
    return min(nlist, max(8, round(2 * math.sqrt(nlist))))


class IvfIndex:
    """An IVF index over one matrix's rows; labels are row positions in that matrix.

    Lists hold half-precision vectors: its ranking agrees with float32's on 99.98% of the top 60 (8-bit codes:
    99.6%), so a search asks for just the k it wants, where 8-bit codes needed 4k candidates re-scored: 72 us
    instead of 143 at 10k x 384, for twice the codes' memory (768 bytes a row). Its scores are within 1e-4 of the
    float32 cosine, so the exact re-score is left to callers that filter after the search (the Neo4j mirror).

    Not thread-safe by itself: the VectorCache calls it under the matrix's lock.
    """

    def __init__(self, rows: np.ndarray) -> None:
        import faiss  # imported here: only stores with a large group need it

        faiss.omp_set_num_threads(1)  # one query per thread: OpenMP fan-out only adds latency on 2 busy cores
        n, dim = rows.shape
        self.nlist = max(1, min(int(4 * math.sqrt(n)), n // 39))  # faiss wants >= 39 training points a list
        self.built_for = n
        quantizer = faiss.IndexFlatIP(dim)
        self._index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, self.nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
        )
        sample = rows if n <= self.nlist * 64 else rows[np.random.default_rng(n).choice(n, self.nlist * 64, replace=False)]
        self._index.train(np.ascontiguousarray(sample, dtype=np.float32))
        self._index.add(np.ascontiguousarray(rows, dtype=np.float32))
        self._index.nprobe = probes(self.nlist)
        self._quantizer = quantizer  # faiss keeps only a raw pointer to it
        self.size = n
        self._row_bytes = 2 * dim + 8  # read per search for the cache budget; faiss's own `d` is a slow SWIG lookup

    def add(self, rows: np.ndarray) -> None:
        if len(rows):
            self._index.add(np.ascontiguousarray(rows, dtype=np.float32))
            self.size += len(rows)

    def candidates(self, query: np.ndarray, k: int) -> np.ndarray:
        return self.nearest(query, k)[0]

    def nearest(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best row positions, best first, and their half-precision scores (within 1e-4 of the float32
        cosine; 1.2e-5 at most measured at 384 dimensions)."""
        scores, labels = self._index.search(query.reshape(1, -1).astype(np.float32, copy=False), k)
        found = labels[0] >= 0
        return labels[0][found], scores[0][found]

    @property
    def nprobe(self) -> int:
        """Lists a search reads (`probes`); settable, for the bench that compares rules on one index."""
        return int(self._index.nprobe)

    @nprobe.setter
    def nprobe(self, value: int) -> None:
        self._index.nprobe = value

    @property
    def nbytes(self) -> int:
        return self.size * self._row_bytes


def top_up_or_rebuild(ann: IvfIndex | None, rows: np.ndarray | None, size: int, *, building: bool,
                      min_rows: int = ANN_MIN_ROWS) -> bool:
    """Add appended rows to the index; True when an index should be (re)built: the matrix reached `min_rows`
    with none yet, or outgrew its index fourfold (lists too long: rebalance), and no build is under way."""
    if ann is not None and ann.size < size:
        ann.add(rows[ann.size : size])  # type: ignore[index]
    outgrown = ann is not None and size > 4 * ann.built_for
    return not (size < min_rows or building or (ann is not None and not outgrown))


def built_index(rows: np.ndarray, what: str) -> IvfIndex | None:
    """An index over `rows`, or None when the build fails (logged): exact scans keep answering meanwhile, and
    the next search tries again."""
    try:
        return IvfIndex(rows)
    except Exception:  # noqa: BLE001
        log.exception("building the vector index of %s failed", what)
        return None
