"""Two workers on one Neo4j: every episode stored once, and a fact chain both extend stays one chain.

The case that breaks without the group lock: episodes that each move the same person to a new city,
ingested by two engines at the same time (two drivers, as two worker processes have). Both read the
person's `lives_in` chain before either commits, and each ends the current fact in favour of its own
city: two facts current at once, one superseded twice. With the lock the second writer waits for the
first to commit and reads what it wrote, so the chain ends up as one writer alone would leave it.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode, Fact, IngestOutcome, episode_id_for
from mnemobus.store.neo4j import Neo4jStore
from mnemobus.store.sqlite import SqliteStore
from test_conformance import T0  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio

CITIES = ("Lisbon Porto Madrid Seville Valencia Paris Lyon Marseille Nantes Brussels Antwerp Amsterdam Utrecht "
          "Hamburg Bremen Cologne Munich Vienna Graz Zurich Geneva Milan Turin Florence Naples Prague Brno Krakow "
          "Gdansk Warsaw Vilnius Riga Tallinn Helsinki Stockholm Oslo Bergen Copenhagen Aarhus Dublin").split()


def moves(group: GroupId) -> list[Episode]:
    """One move a day, each to a city never named before (a repeat would reinforce, not extend, the chain)."""
    return [Episode(id=episode_id_for(group, f"move-{i}", "user"), group_id=group, content=f"I moved to {city}.",
                    role="user", source_message_id=f"move-{i}", reference_time=T0 + timedelta(days=i))
            for i, city in enumerate(CITIES)]


def chain_of(facts: Sequence[Fact]) -> list[tuple[str, object, object, str | None]]:
    """The lives_in facts as (city, from, until, city it was superseded by), oldest first."""
    names = {f.id: f.object_name for f in facts}
    lives = sorted((f for f in facts if f.relation == "lives_in"), key=lambda f: (f.valid_at, f.id))
    return [(f.object_name, f.valid_at, f.invalid_at, names.get(f.superseded_by or "")) for f in lives]


@pytest.fixture
async def two_engines(neo4j_uri: str) -> AsyncIterator[tuple[MemoryEngine, MemoryEngine]]:
    engines = [MemoryEngine(Neo4jStore(neo4j_uri), ParsedExtractor(), HashEmbedder()) for _ in range(2)]
    for e in engines:
        await e.store.open()
    try:
        yield engines[0], engines[1]
    finally:
        for e in engines:
            await e.close()


async def test_two_writers_moving_one_person_leave_the_chain_one_writer_would(
    two_engines: tuple[MemoryEngine, MemoryEngine], new_group: Callable[[str], GroupId], tmp_path: Path
) -> None:
    group = new_group("moves")
    episodes = moves(group)
    shuffled = random.Random(5).sample(episodes, len(episodes))  # a stream delivers out of order
    halves = [shuffled[0::2] + shuffled[1:8:2], shuffled[1::2] + shuffled[0:8:2]]  # 4 redelivered to each side
    outcomes: list[IngestOutcome | BaseException] = []

    async def work(engine: MemoryEngine, mine: list[Episode]) -> None:
        for i in range(0, len(mine), 4):  # batches of 4, as small worker fetches
            outcomes.extend(await engine.ingest_many(mine[i : i + 4]))

    async with anyio.create_task_group() as tg:
        for engine, mine in zip(two_engines, halves, strict=True):
            tg.start_soon(work, engine, mine)

    assert all(isinstance(o, IngestOutcome) for o in outcomes), outcomes
    assert sum(o.created for o in outcomes) == len(episodes)  # type: ignore[union-attr]  # each one stored once
    neo = two_engines[0].store
    assert await neo.count_episodes(group) == len(episodes)

    alone = SqliteStore(tmp_path / "alone.sqlite3")  # the same episodes, in time order, one writer
    await alone.open()
    try:
        await MemoryEngine(alone, ParsedExtractor(), HashEmbedder()).ingest_many(episodes)
        expected = chain_of([f for f, _ in (await alone.export_group(group)).facts])
    finally:
        await alone.close()
    got = chain_of([f for f, _ in (await neo.export_group(group)).facts])
    assert [c for c, _, until, _ in got if until is None] == [CITIES[-1]]  # one current fact: the last move
    assert got == expected
