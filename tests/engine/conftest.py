"""Engine fixtures: a real SQLite file per test, the hashing embedder unless a test is about meaning."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import Embedder, HashEmbedder, LocalOnnxEmbedder
from mnemobus.store.model import Episode
from mnemobus.store.sqlite import SqliteStore

from engine_support import make_episode


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", params=["static", "local"])
def local_embedder(request: pytest.FixtureRequest, static_cache_dir: Path) -> Embedder:
    """Meaningful tests run on both real embedders: the default (static) and the transformer it is distilled from."""
    if request.param == "static":
        from mnemobus.engine.embed_static import StaticEmbedder

        return StaticEmbedder("all-MiniLM-L6-v2-int8", static_cache_dir)
    return LocalOnnxEmbedder()


async def _engine(path: Path, embedder: Embedder) -> MemoryEngine:
    store = SqliteStore(path, dim=embedder.dim)
    await store.open()
    return MemoryEngine(store, embedder=embedder)


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[MemoryEngine]:
    eng = await _engine(tmp_path / "memory.sqlite3", HashEmbedder())
    yield eng
    await eng.close()


@pytest.fixture
async def semantic_engine(tmp_path: Path, local_embedder: Embedder) -> AsyncIterator[MemoryEngine]:
    eng = await _engine(tmp_path / "memory.sqlite3", local_embedder)
    yield eng
    await eng.close()


@pytest.fixture
def episode() -> Callable[..., Episode]:
    return make_episode
