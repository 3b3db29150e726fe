"""Two batches in flight at once (the worker's default: the next is extracted while the store commits the last): the
second's "she" still finds the person the first named, though the first is not committed yet, and batches are
extracted in the order they came (sentences of this file's own)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.engine.turns_in_hand import TurnsInHand
from mnemobus.store.sqlite import SqliteStore

from engine_support import T0, make_episode

pytestmark = pytest.mark.anyio


async def test_she_in_the_next_batch_is_the_person_named_in_the_batch_still_committing(tmp_path: Path,
                                                                                      monkeypatch: pytest.MonkeyPatch
                                                                                      ) -> None:
    store = SqliteStore(tmp_path / "inflight.sqlite3", dim=HashEmbedder().dim)
    await store.open()
    engine = MemoryEngine(store, ParsedExtractor(), HashEmbedder())
    first_committing, release = anyio.Event(), anyio.Event()
    commit = store.run_transactions

    async def slow_first_commit(works: Any, prefetch: Any = None) -> Any:
        if not first_committing.is_set():
            first_committing.set()
            await release.wait()  # the first batch's commit is held until the second batch was extracted
        return await commit(works, prefetch)

    monkeypatch.setattr(store, "run_transactions", slow_first_commit)
    named = make_episode("user_ana", "My cousin Marta lives in Porto.", at=T0, msg="t1")
    pronoun = make_episode("user_ana", "She works as a pharmacist.", at=T0 + timedelta(seconds=20), msg="t2")
    extracted = []
    extract_after = engine.extractor.extract_after  # type: ignore[attr-defined]

    async def noting(episodes: Any, previous: Any) -> Any:
        out = await extract_after(episodes, previous)
        extracted.append([e.source_message_id for e in episodes])
        if len(extracted) == 2:
            release.set()
        return out

    monkeypatch.setattr(engine.extractor, "extract_after", noting)
    async with anyio.create_task_group() as tg:
        tg.start_soon(engine.ingest_many, [named])
        await first_committing.wait()
        tg.start_soon(engine.ingest_many, [pronoun])
    export = await store.export_group(named.group_id)
    await engine.close()
    assert extracted == [["t1"], ["t2"]]
    assert ("Marta", "works_as", "pharmacist") in {(f.subject_name, f.relation, f.object_name) for f, _ in export.facts}


async def test_a_batch_waits_for_every_batch_before_it_to_be_extracted() -> None:
    hand = TurnsInHand()
    first, second, third = hand.ticket(), hand.ticket(), hand.ticket()
    order: list[int] = []

    async def extract(ticket: int) -> None:
        await hand.turn_of(ticket)
        order.append(ticket)
        hand.done(ticket)

    async with anyio.create_task_group() as tg:
        tg.start_soon(extract, third)
        tg.start_soon(extract, second)
        hand.done(first)  # the first gave up before extracting (its batch failed): the others go, in order
    assert order == [second, third]
