"""Helpers for the start-up warming tests (plugin and API): groups written before a process starts."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio

from mnemobus.shared.config import Settings
from mnemobus.kernel.backends import open_engine
from mnemobus.shared.groups import GroupId
from mnemobus.shared.metrics import PipelineMetrics
from mnemobus.store.model import Episode, episode_id_for


async def write_groups_in_order(settings: Settings, *groups: str) -> None:
    """One episode in each group, oldest first, then the store is closed (as by an earlier process)."""
    engine = await open_engine(settings)
    try:
        for group in groups:
            await engine.ingest(Episode(id=episode_id_for(GroupId(group), "m1", "user"), group_id=GroupId(group),
                                        content=f"I live in {group.title()}.", role="user", source_message_id="m1",
                                        reference_time=datetime.now(UTC)))
    finally:
        await engine.close()


async def until_warmed(metrics: PipelineMetrics, timeout: float = 10) -> None:
    with anyio.fail_after(timeout):
        while metrics.warmed_groups._value.get() == 0:
            await anyio.sleep(0.02)
