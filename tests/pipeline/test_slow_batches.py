"""A batch whose storing takes longer than ack_wait is said and counted, and still stored once: a store answering
slowly (a Neo4j just started plans every query afresh) shows in a warning and a metric, not as a silent worker."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio
import pytest

from mnemobus.kernel.app import open_runtime
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.store.model import Episode
from tests.pipeline.test_worker_stop import storing_one

pytestmark = pytest.mark.anyio

ACK_WAIT_S = 0.6


async def test_a_batch_stored_slower_than_ack_wait_is_warned_and_counted_and_stored_once(
        settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    slow = settings.model_copy(update={"worker": settings.worker.model_copy(update={"ack_wait_s": ACK_WAIT_S})})
    ep = EpisodeMessage(episode_id="slow-1", group_id="user_josh", content="I live in Oslo.", source_message_id="u1")
    async with open_runtime(slow) as rt:
        ingest_many = rt.engine.ingest_many

        async def answering_slowly(episodes: Sequence[Episode]) -> list[object]:
            await anyio.sleep(ACK_WAIT_S * 3)  # the store's first answers, as a cold server gives them
            return await ingest_many(episodes)

        rt.engine.ingest_many = answering_slowly  # type: ignore[method-assign]
        stop = anyio.Event()
        with caplog.at_level(logging.WARNING, logger="mnemobus"):
            async with storing_one(rt, ep, stop):
                with anyio.fail_after(30):
                    while rt.metrics.worker_slow_batches._value.get() < 1:
                        await anyio.sleep(0.02)
                stored = rt.metrics.episodes_stored.labels(created="true")
                with anyio.fail_after(30):
                    while stored._value.get() < 1:  # acked once stored, after the slow write
                        await anyio.sleep(0.02)
                stop.set()
        assert await rt.engine.store.count_episodes("user_josh") == 1
    said = [r for r in caplog.records if "took" in r.getMessage() and "longer than ack_wait" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "batch of 1 episode(s)" in said[0].getMessage()
