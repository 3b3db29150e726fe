"""Waiting on counts the bus keeps, not on time: how a test shows that something did *not* happen.

A sleep before "nothing was stored" passes when the thing is merely slow. These read what JetStream counts: a
worker has settled a delivery once its consumer holds it neither waiting nor unacknowledged (a nak waiting out
its delay still counts as unacknowledged), and the stream keeps the order of one connection's messages.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.shared.envelope import EpisodeMessage


async def worker_settled(bus: Bus, timeout: float = 20) -> bool:
    """True once the worker's consumer has no episode waiting and none delivered but unacknowledged."""
    with anyio.move_on_after(timeout):
        while True:
            info = await bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
            if info.num_pending == 0 and info.num_ack_pending == 0:
                return True
            await anyio.sleep(0.02)
    return False


#: the group of the sentinel episodes (a test that counts every group's episodes counts one of them)
SENTINEL_GROUP = "test_sentinel"


async def settle_behind_a_sentinel(bus: Bus, store: Any) -> None:
    """Publish a sentinel episode, wait until the worker has stored it, then until it has settled everything.

    The stream keeps the order in which one connection's messages arrive, so an episode published earlier on this
    connection (by a plugin or API sharing it) sits before the sentinel: once the sentinel is stored and nothing
    is waiting or unacknowledged, such an episode has been stored or dead-lettered, never merely delayed."""
    before = await store.count_episodes(SENTINEL_GROUP)
    sentinel = EpisodeMessage(episode_id=f"sentinel-{uuid.uuid4().hex}", group_id=SENTINEL_GROUP,
                              content="sentinel", source_message_id=f"sentinel-{uuid.uuid4().hex}")
    await bus.js_publish(subjects.episode(SENTINEL_GROUP), sentinel.to_wire(), msg_id=sentinel.episode_id)
    with anyio.fail_after(20):
        while await store.count_episodes(SENTINEL_GROUP) <= before:
            await anyio.sleep(0.02)
    assert await worker_settled(bus), "the worker still holds unsettled episodes"
