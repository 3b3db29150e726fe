"""uses_<kind> end to end: a new thing of the same kind ends the old one; a thing of another kind does not."""

from __future__ import annotations

import pytest
from engine_support import make_episode

from mnemobus.engine import MemoryEngine

pytestmark = pytest.mark.anyio
G = "user_a"


async def _held(engine: MemoryEngine, relation: str) -> list[tuple[str, bool]]:
    return [(f.object_name, f.invalid_at is None) for f in await engine.edge_history(G, "User", relation)]


async def test_a_new_e_reader_ends_the_old_one(engine: MemoryEngine) -> None:
    await engine.ingest(make_episode(G, "I use a Kindle."))
    await engine.ingest(make_episode(G, "I use a Kobo now.", days=5))
    assert sorted(await _held(engine, "uses_ereader")) == [("Kindle", False), ("Kobo", True)]


async def test_a_browser_leaves_the_e_reader_held(engine: MemoryEngine) -> None:
    await engine.ingest(make_episode(G, "I use a Kindle."))
    await engine.ingest(make_episode(G, "My browser is Firefox.", days=5))
    assert (await _held(engine, "uses_ereader"), await _held(engine, "uses_browser")) == (
        [("Kindle", True)], [("Firefox", True)])
