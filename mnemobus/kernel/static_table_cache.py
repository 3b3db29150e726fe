"""Where the test suite keeps the static embedding table: once per machine and per version of what builds it.

Why: distilling the table runs the transformer over the whole vocabulary (~30,000 sequences): 60-110 s of the two
shared cores, and it was done twice per test run (once for the run, once in the repository's data/ by the blind
extraction tests), on the critical path of whichever worker needed it first. The table is a pure function of the
model weights, the tokenizer, the distillation code and the libraries that run it, so the folder is named by a
digest of exactly those: a change to any of them gets a new folder and a new build, by the product's own
StaticEmbedder (its file lock makes a second run or worker wait for the first's build). The LLM server's compiled
wheel is kept per machine the same way (mk/llm.mk).

`MNEMOBUS_TEST_STATIC_CACHE` names another folder (an empty one to watch a build from scratch).

Each use stamps its folder; a sibling no run has used for `UNUSED_DAYS` is a superseded version (47 MB each) and is
removed. Not on every change of key: branches of different versions run on one machine at once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

ENV = "MNEMOBUS_TEST_STATIC_CACHE"
UNUSED_DAYS = 14  # longer than a branch sits idle between runs; a removed table is rebuilt on its next use
_STAMP = ".last-used"


def _inputs(model: str) -> list[bytes]:
    """What the table is computed from."""
    import numpy
    import onnxruntime

    from mnemobus.engine import embed, embed_static

    teacher = embed.LocalOnnxEmbedder(model)
    files = [teacher._model_path, teacher._tokenizer_path, Path(embed.__file__), Path(embed_static.__file__)]
    return [model.encode(), numpy.__version__.encode(), onnxruntime.__version__.encode(),
            *(p.read_bytes() for p in files)]


def table_key(model: str) -> str:
    """A digest of the model, the tokenizer, the code that distils the table and the library versions."""
    digest = hashlib.sha256()
    for part in _inputs(model):
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()[:20]


def machine_cache_dir(model: str) -> Path:
    """The folder for `model`'s table on this machine (made if missing): $MNEMOBUS_TEST_STATIC_CACHE, else
    $XDG_CACHE_HOME or ~/.cache, under mnemobus/static-embeddings/<key>."""
    if os.environ.get(ENV):
        path = Path(os.environ[ENV])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        path = base / "mnemobus" / "static-embeddings" / table_key(model)
        path.mkdir(parents=True, exist_ok=True)
        (path / _STAMP).touch()
        _remove_unused_siblings(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _last_used(folder: Path) -> float:
    stamp = folder / _STAMP
    return (stamp if stamp.exists() else folder).stat().st_mtime


def _remove_unused_siblings(current: Path) -> None:
    """Superseded tables' folders, unused for UNUSED_DAYS (a folder from before stamps counts from its own time)."""
    cutoff = time.time() - UNUSED_DAYS * 86400
    for folder in current.parent.iterdir():
        if folder != current and folder.is_dir() and _last_used(folder) < cutoff:
            shutil.rmtree(folder, ignore_errors=True)
