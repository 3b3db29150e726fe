"""A store that stops answering (Neo4j restarting), or whose write lock another process holds (a GDPR erasure
rebuilding its full-text indexes: ~28 s at a million messages on this machine), is waited out: the worker holds its
batch, keeps it in progress, and stores it once the store takes writes again, without spending delivery attempts.

The outage here is a switch on the real engine (every write fails as an unreachable store's do, and so does
the health query); the chaos tests restart a real Neo4j under load. The lock is a real one: another connection to
the SQLite file holding a write transaction open.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.kernel import store_hold
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.shared.config import Settings
from mnemobus.bus.dlq import list_letters
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.shared.errors import StoreUnavailable
from tests.pipeline.conftest import wait_for_episodes

pytestmark = pytest.mark.anyio

GROUP = "user_outage"


def two_quick_attempts(settings: Settings) -> Settings:
    """Two attempts of 0.05 s backoff: retried episode by episode, a wait of a few seconds dead-letters them all."""
    return settings.model_copy(update={"worker": settings.worker.model_copy(
        update={"max_deliver": 2, "backoff_s": [0.05], "ack_wait_s": 1.0})})


@contextlib.asynccontextmanager
async def worker_serving(rt) -> AsyncIterator[None]:  # type: ignore[no-untyped-def]
    """The worker serving until the block ends, however it ends: a failed assertion stops it too, rather than leave
    the test waiting on a runner nobody stops."""
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: serve(rt, {"worker"}, task_status=task_status))
        try:
            yield
        finally:
            rt.stop.set()


async def publish(rt, prefix: str, n: int) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        ep = EpisodeMessage(episode_id=f"{prefix}-{i}", group_id=GROUP, content=f"episode {i}", source_message_id=f"m{i}")
        await rt.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id)


async def test_an_outage_longer_than_every_retry_loses_no_episode_and_spends_no_attempt(settings: Settings) -> None:
    async with open_runtime(two_quick_attempts(settings)) as rt:
        down = {"until": anyio.current_time() + 3.0}
        real_ingest, real_ping = rt.engine.ingest_many, rt.engine.store.ping

        async def ingest_many(episodes):  # type: ignore[no-untyped-def]
            if anyio.current_time() < down["until"]:
                return [StoreUnavailable("Neo4j write failed: ServiceUnavailable") for _ in episodes]
            return await real_ingest(episodes)

        async def ping() -> None:
            if anyio.current_time() < down["until"]:
                raise StoreUnavailable("Neo4j read failed: ServiceUnavailable")
            await real_ping()

        rt.engine.ingest_many, rt.engine.store.ping = ingest_many, ping  # type: ignore[method-assign]
        async with worker_serving(rt):
            await publish(rt, "held", 20)
            assert await wait_for_episodes(rt, GROUP, 20, timeout=30) == 20
            assert await list_letters(rt.bus) == []
            assert rt.metrics.worker_store_waits._value.get() >= 1
            assert rt.metrics.worker_store_wait_seconds._value.get() > 1.0  # the batch was held, kept in progress
            assert not rt.metrics.worker_retries._metrics  # no attempt spent: nothing was nak'ed for later


async def test_a_write_lock_held_longer_than_every_retry_loses_no_episode_and_spends_no_attempt(
        settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # reads go on under the lock (the health query answers), so this is not an outage
    monkeypatch.setattr(store_hold, "SAY_EVERY_S", 1.0)
    async with open_runtime(two_quick_attempts(settings)) as rt:
        await rt.engine.store.ping()
        other = sqlite3.connect(settings.store.sqlite_path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's write transaction, as an erasure's rebuild holds one
        try:
            async with worker_serving(rt):
                await publish(rt, "locked", 5)
                await anyio.sleep(8.0)  # each write waits the store's busy timeout; two attempts took ~5 s
                assert await rt.engine.store.count_episodes(GROUP) == 0  # the lock held every write back
                # the hold shows while it lasts: counted as it goes, and said again
                assert rt.metrics.worker_store_wait_seconds._value.get() > 2.0
                assert "another writer holds the store's write lock: still holding" in caplog.text
                other.execute("COMMIT")
                assert await wait_for_episodes(rt, GROUP, 5, timeout=30) == 5
                assert await list_letters(rt.bus) == []
                assert rt.metrics.worker_store_waits._value.get() >= 1
                assert not rt.metrics.worker_retries._metrics
        finally:
            if other.in_transaction:
                other.execute("ROLLBACK")
            other.close()
