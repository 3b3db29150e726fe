"""Which stored turns are "the turns before" an episode (engine/previous_turn.py): the PRONOUN_REACH latest before it
in the same group and conversation (channel), read only for the first episode of its conversation in the batch, when
it or a later one within reach says "she" or "he"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mnemobus.engine.previous_turn import PRONOUN_REACH, previous_turns, wants_previous
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
T0 = datetime(2026, 4, 1, 9, tzinfo=UTC)
G = GroupId("user_rosa")


def turn(n: int, content: str, *, channel: str = "c1", group: GroupId = G) -> Episode:
    return Episode(id=f"{group}-{n}", group_id=group, content=content, role="user", source_message_id=f"m{n}",
                   reference_time=T0 + timedelta(minutes=n), channel_id=channel)


@pytest.fixture
async def store(tmp_path: Path) -> SqliteStore:  # type: ignore[misc]
    s = SqliteStore(tmp_path / "turns.sqlite3")
    await s.open()
    yield s
    await s.close()


async def stored(store: SqliteStore, *episodes: Episode) -> None:
    async with store.transaction() as tx:
        for e in episodes:
            await tx.insert_episode(e, screened=False, embedding=None)


async def previous_ids(store: SqliteStore, batch: list[Episode]) -> list[list[str]]:
    return [[e.id for e in before] for before in await previous_turns(store, batch)]


def test_only_a_turn_saying_she_or_he_wants_its_previous_turn() -> None:
    assert wants_previous(turn(1, "She moved to Cardiff.")) and wants_previous(turn(1, "I met him at work."))
    assert not wants_previous(turn(1, "They moved to Cardiff.")) and not wants_previous(turn(1, "The shed is new."))


async def test_the_turns_before_are_the_latest_before_it_in_its_channel_oldest_first(store: SqliteStore) -> None:
    await stored(store, turn(1, "My aunt Wanda lives in Gdansk."), turn(2, "My uncle Piotr is a baker."),
                 turn(3, "Another chat names Ola.", channel="c2"))
    assert await previous_ids(store, [turn(4, "She moved to Sopot.")]) == [[f"{G}-1", f"{G}-2"]]


async def test_no_more_turns_than_a_pronoun_reaches_are_read(store: SqliteStore) -> None:
    await stored(store, *(turn(n, f"Turn {n}.") for n in range(1, 8)))
    assert await previous_ids(store, [turn(8, "She moved to Sopot.")]) == [
        [f"{G}-{n}" for n in range(8 - PRONOUN_REACH, 8)]]


async def test_a_later_turn_of_the_same_conversation_in_the_batch_reads_nothing(store: SqliteStore) -> None:
    await stored(store, turn(1, "My aunt Wanda lives in Gdansk."))
    batch = [turn(2, "She moved to Sopot."), turn(3, "She likes it there.")]
    assert await previous_ids(store, batch) == [[f"{G}-1"], []]


async def test_a_pronoun_within_reach_of_the_batchs_start_makes_its_first_turn_look_back(store: SqliteStore) -> None:
    await stored(store, turn(1, "My aunt Wanda lives in Gdansk."))
    batch = [turn(2, "The weather is fine."), turn(3, "She moved to Sopot.")]
    assert await previous_ids(store, batch) == [[f"{G}-1"], []]


async def test_another_group_or_a_conversation_without_a_pronoun_gets_none(store: SqliteStore) -> None:
    await stored(store, turn(1, "My aunt Wanda lives in Gdansk."))
    batch = [turn(2, "The weather is fine."), turn(3, "She moved to Sopot.", group=GroupId("user_other"))]
    assert await previous_ids(store, batch) == [[], []]
