"""`mnemobus import jsonl` refuses a row it would store broken, and stores the rest."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from mnemobus.engine.embedders import make_embedder
from mnemobus.graphio.checkpoint import Checkpoint
from mnemobus.graphio.export import jsonl_lines
from mnemobus.graphio.restore import RowsImporter
from mnemobus.graphio.resumable import import_file
from mnemobus.shared.groups import GroupId
from mnemobus.store.sqlite import SqliteStore

from graph_support import build_josh  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio
GROUP = GroupId("user_josh")


async def test_a_row_whose_embedding_is_not_the_stores_width_is_dead_lettered_and_the_group_still_searches(
        tmp_path: Path) -> None:
    # stored, a 32-value vector among 384-value ones failed every vector search of the group (numpy could not
    # shape the matrix): one bad line of a hand-made or damaged file would have broken the group's recall
    store = SqliteStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        await build_josh(store, GROUP)
        lines = list(jsonl_lines(await store.export_group(GROUP)))
        await store.delete_group(GROUP)
        bad = next(i for i, text in enumerate(lines) if json.loads(text)["kind"] == "episode")
        row = json.loads(lines[bad])
        row["embedding"] = base64.b64encode(np.ones(32, "<f4").tobytes()).decode("ascii")
        lines[bad] = json.dumps(row)
        source = tmp_path / "josh.jsonl"
        source.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
        dead = tmp_path / "dead.jsonl"
        counts = await import_file(source, Checkpoint(tmp_path / "cp.json", source), dead, RowsImporter(store),
                                   what="import", batch_size=500)
        assert (counts.stored, counts.dead) == (len(lines) - 2, {"invalid_row": 1})  # the header is not a row
        told = json.loads(dead.read_text())
        assert (told["line"], told["detail"]) == (bad + 1, "embedding has 32 values; this store's embeddings have 384")
        query = make_embedder("hash", "", None).embed(["Anna lives in Paris"])[0]
        assert await store.search_episodes_vector(GROUP, query, 5)  # the group's vectors still search
    finally:
        await store.close()
