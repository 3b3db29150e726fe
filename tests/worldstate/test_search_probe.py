"""The search probe catches what a health check misses: a store that pings fine but cannot search."""

from __future__ import annotations

import sqlite3

import pytest

from mnemobus.shared.config import Settings
from worldstate.probes import sentinel_episode
from worldstate_support import goal_state, running_world, shipped_config

pytestmark = pytest.mark.anyio


def break_episode_search(settings: Settings) -> None:
    """Drop the episode full-text index behind the engine's back, as a corrupted index would."""
    with sqlite3.connect(settings.store.sqlite_path) as conn:
        conn.execute("DROP TABLE episodes_fts")


async def test_broken_search_fails_search_goal_while_health_goal_passes(settings: Settings) -> None:
    async with running_world(settings, shipped_config()) as world:
        await world.poll_until(lambda s: goal_state(s, "memory.search_working") == "ok")

        break_episode_search(settings)
        snap = await world.poll_until(lambda s: goal_state(s, "memory.search_working") == "violated")

        assert goal_state(snap, "memory.store_healthy") == "ok"
        assert snap.document["domains"]["memory"]["data"]["searchError"]
        assert world.gauge("mnemobus_goal_satisfied", "memory.search_working") == 0.0
        assert world.gauge("mnemobus_goal_satisfied", "memory.store_healthy") == 1.0


async def test_search_probe_reseeds_its_sentinel_after_the_canary_group_is_wiped(settings: Settings) -> None:
    cfg = shipped_config()
    async with running_world(settings, cfg, worker=False) as world:
        await world.poll_until(lambda s: goal_state(s, "memory.search_working") == "ok")
        await world.rt.engine.store.delete_group(cfg.canary_group)

        snap = await world.poller.poll_once()

        assert snap.document["domains"]["memory"]["data"]["searchOk"] is True
        sentinel = sentinel_episode(cfg.canary_group)
        assert await world.rt.engine.store.get_episode(sentinel.group_id, sentinel.id) is not None


async def test_a_damaged_index_fails_the_search_goal_naming_the_repair(settings: Settings) -> None:
    from tests.store_damage import scramble

    async with running_world(settings, shipped_config()) as world:
        await world.poll_until(lambda s: goal_state(s, "memory.search_working") == "ok")

        scramble(settings.store.sqlite_path, "facts_fts", "entities_fts", "episodes_fts")
        snap = await world.poll_until(lambda s: goal_state(s, "memory.search_working") == "violated")

        assert goal_state(snap, "memory.store_healthy") == "ok"  # a ping and a count do not read an index
        error = snap.document["domains"]["memory"]["data"]["searchError"]
        assert error.startswith("StoreCorrupt") and "mnemobus doctor --repair" in error, error
