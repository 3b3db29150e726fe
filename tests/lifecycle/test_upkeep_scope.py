"""A scheduled upkeep pass works only on the groups whose id starts with its section's `groups_prefix`: a store
shared with others (and the lifecycle tests on the run's shared Neo4j, which need not run alone for it)."""

from __future__ import annotations

import uuid

import pytest

from mnemobus.shared.config import Settings
from tests.lifecycle.conftest import running
from tests.lifecycle.test_lifecycle_e2e import JOSH, days_ago, moved_to_bergen, sample, tell, until, with_upkeep

pytestmark = pytest.mark.anyio


async def test_a_scheduled_eviction_leaves_a_group_outside_its_prefix_alone(settings: Settings) -> None:
    outside = f"other-{uuid.uuid4().hex[:10]}"
    scoped = with_upkeep(settings, retention={"scheduled": True, "interval_s": 0.2, "groups_prefix": JOSH})
    async with running(scoped) as system:
        try:
            # the same two turns in a group outside the prefix: a fact ended 700 days ago, past the 365-day retention
            await tell(system, outside, ("I live in Oslo.", days_ago(800)),
                       ("I moved from Oslo to Bergen.", days_ago(700)))
            await moved_to_bergen(system)

            async def josh_evicted() -> int:
                return (await system.store.evicted_so_far(JOSH)).facts

            # a deadline only bounds a failing test: a pass over the run's Neo4j at load ~25 takes seconds
            assert await until(josh_evicted, timeout=60) == 1
            passes = sample(system, "mnemobus_upkeep_runs_total", job="evict", outcome="ok")

            async def the_evicting_pass_ended() -> bool:
                # the pass that evicted Josh began after both groups held their ended fact (the outside group's was
                # stored first); it has ended once the count passes what it was when Josh's eviction was seen
                return sample(system, "mnemobus_upkeep_runs_total", job="evict", outcome="ok") >= passes + 1

            assert await until(the_evicting_pass_ended, timeout=60)
            assert (await system.store.evicted_so_far(outside)).facts == 0
        finally:
            await system.store.delete_group(outside)
