"""A store whose full-text index is damaged (builds before 2026-11-29 broke one after ~1,200 erasures) while the
pipeline runs: requests still reach the agent, unenriched and counted under their own reason, episodes the store
cannot take are kept (dead-lettered with that reason, never dropped), and `mnemobus doctor --repair`, run beside
the live pipeline, mends the index from its rows so memory answers again and the kept episodes replay.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from mnemobus.bus.dlq import replay
from mnemobus.kernel.app import Runtime
from mnemobus.kernel.doctor import doctor
from mnemobus.shared import subjects
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import EpisodeMessage
from tests.pipeline.conftest import ask, dead_letters, request, running, wait_for_episodes
from tests.store_damage import scramble

pytestmark = pytest.mark.anyio

GROUP = "user_josh"


@contextlib.asynccontextmanager
async def damaged_after_one_exchange(settings: Settings) -> AsyncIterator[Runtime]:
    """The pipeline running, one exchange stored, then every full-text index of its store scrambled."""
    async with running(settings) as rt:
        await ask(rt, request("I live in London and I write code in neovim"))
        assert await wait_for_episodes(rt, GROUP, 1) >= 1
        scramble(settings.store.sqlite_path, "facts_fts", "entities_fts", "episodes_fts")
        yield rt


async def test_a_damaged_index_fails_open_under_its_own_reason_and_doctor_repair_brings_memory_back(
        settings: Settings) -> None:
    async with damaged_after_one_exchange(settings) as rt:
        reply = await ask(rt, request("where do I live?"))
        assert reply["content"].startswith("Noted") and reply["memory"]["status"] == "error"
        assert rt.metrics.fail_open.labels(reason="store_corrupt")._value.get() == 1

        said: list[str] = []
        assert await doctor(settings, smoke=False, repair=True, say=said.append) == 0, said
        assert any(line.startswith("store integrity: FAILED: episodes_fts") for line in said), said
        assert "store integrity: ok" in said[-2], said

        reply = await ask(rt, request("where do I live?"))
        assert reply["memory"]["status"] == "enriched" and "London" in reply["memory"]["block"], reply["memory"]


async def test_an_episode_the_damaged_store_cannot_take_is_kept_under_its_own_reason_and_stored_after_the_repair(
        settings: Settings) -> None:
    async with damaged_after_one_exchange(settings) as rt:
        ep = EpisodeMessage(episode_id="after-damage", group_id=GROUP, content="Josh moved to Lisbon and uses helix now",
                            source_message_id="m-after")
        await rt.bus.js_publish(subjects.episode(GROUP), ep.to_wire(), msg_id=ep.episode_id)

        [letter] = await dead_letters(rt, GROUP, 1, timeout=30)
        assert letter.letter.reason == "store_corrupt"
        assert "mnemobus doctor --repair" in letter.letter.error
        assert rt.metrics.episodes_dead_lettered.labels(reason="store_corrupt")._value.get() == 1

        said: list[str] = []
        assert await doctor(settings, smoke=False, repair=True, say=said.append) == 0, said
        assert (await replay(rt.bus, GROUP)).replayed == 1
        assert await wait_for_episodes(rt, GROUP, 2) == 2
        assert await rt.engine.store.get_episode(GROUP, "after-damage") is not None
