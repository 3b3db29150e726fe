"""The graph goals through the poller (issue 39): a group past the entity cap, and refreshes that stopped."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mnemobus.shared.config import Settings
from mnemobus.engine.communities import CommunityRefresher
from mnemobus.store.model import Episode
from worldstate_support import goal_state, running_world, shipped_config

pytestmark = pytest.mark.anyio
GROUP = "user_graphgoal"
LINES = ("Alice works at Acme.", "Bob works at Acme.", "Bob lives in Berlin.")


def with_cap(cap: int):  # type: ignore[no-untyped-def]
    cfg = shipped_config()
    return cfg.model_copy(update={"goals": [
        g.model_copy(update={"threshold": cap}) if g.id == "graph.group_within_cap" else g for g in cfg.goals]})


async def store_lines(world, lines: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    """Episodes stored straight through the engine: no worker, so no refresh follows them."""
    for i, text in enumerate(lines):
        await world.rt.engine.ingest(Episode(id=f"ep-{i}", group_id=GROUP, content=text, role="user",
                                             source_message_id=f"m{i}", reference_time=datetime.now(UTC),
                                             speaker="tester"))


@pytest.fixture
def every_three(settings: Settings) -> Settings:
    return settings.model_copy(update={"communities": settings.communities.model_copy(
        update={"refresh_every_episodes": 3})})


async def test_a_group_past_the_entity_cap_violates_the_cap_goal(every_three: Settings) -> None:
    async with running_world(every_three, with_cap(3), worker=False) as world:
        await world.poll_until(lambda s: goal_state(s, "graph.group_within_cap") == "ok")
        await store_lines(world, LINES)
        snap = await world.poll_until(lambda s: goal_state(s, "graph.group_within_cap") == "violated")
        data = snap.document["domains"]["graph"]["data"]
        assert (data["largestGroup"], data["largestGroupEntities"]) == (GROUP, 4)
        assert world.gauge("mnemobus_goal_satisfied", "graph.group_within_cap") == 0.0


async def test_episodes_with_no_refresh_after_them_violate_the_refresh_goal_until_one_runs(
        every_three: Settings) -> None:
    async with running_world(every_three, shipped_config(), worker=False) as world:
        await store_lines(world, LINES)
        snap = await world.poll_until(lambda s: goal_state(s, "graph.refreshes_keeping_up") == "violated")
        assert snap.document["domains"]["graph"]["data"]["refreshOverdueGroups"] == 1
        await CommunityRefresher(world.rt.engine.store, None).refresh(GROUP)
        await world.poll_until(lambda s: goal_state(s, "graph.refreshes_keeping_up") == "ok")
