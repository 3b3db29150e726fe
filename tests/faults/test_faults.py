"""Fault tests: real nats-server, real store, exact counts. Every episode stored exactly once."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.bus.connection import Bus
from mnemobus.bus.dlq import list_letters
from mnemobus.shared.envelope import EpisodeMessage
from tests.bus_counts import worker_settled

pytestmark = [pytest.mark.anyio, pytest.mark.own_server, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _episode(i: int) -> EpisodeMessage:
    return EpisodeMessage(episode_id=f"fault-{i}", group_id="user_josh",
                          content=f"Alex works on Project{i % 50}", source_message_id=f"m{i}")


async def _publish_all(bus: Bus, start: int, stop: int, chunk: int = 250) -> None:
    """Publish with retries until the server acked each one; ids make retries harmless."""
    for lo in range(start, stop, chunk):
        pending = list(range(lo, min(lo + chunk, stop)))
        while pending:
            failed: list[int] = []

            async def one(i: int) -> None:
                ep = _episode(i)
                try:
                    await bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id, timeout_s=2)
                except Exception:
                    failed.append(i)

            async with anyio.create_task_group() as tg:
                for i in pending:
                    tg.start_soon(one, i)
            pending = failed
            if failed:
                await anyio.sleep(0.2)


async def _count(engine, group: str = "user_josh") -> int:
    return await engine.store.count_episodes(group)


async def _wait_count(engine, n: int, timeout: float) -> int:
    got = 0
    with anyio.move_on_after(timeout):
        while (got := await _count(engine)) < n:
            await anyio.sleep(0.1)
    return got


def _worker_process(settings) -> subprocess.Popen:
    env = dict(os.environ)
    env.update({
        "MNEMOBUS_NATS__URL": settings.nats.url,
        "MNEMOBUS_STORE__SQLITE_PATH": str(settings.store.sqlite_path),
        "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash",
        "MNEMOBUS_WORKER__ACK_WAIT_S": "2",
        "MNEMOBUS_METRICS__PORT": "0",
        "MNEMOBUS_IDENTITY__USERS_FILE": str(settings.identity.users_file),
    })
    return subprocess.Popen([sys.executable, "-m", "mnemobus.cli", "run", "--role", "worker", "--quiet"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# exclusive: the episodes through a worker killed and restarted must finish within its bound; beside three other
# workers' tests on two cores they did not (3,872 of 5,000 in 240 s, first merged parallel run). 1,000, not 5,000:
# what is proven is that the batch in flight at the kill is redelivered once and stored once; the kill lands after
# 300 are stored with at least half the stream still to come (asserted below), so the restarted worker takes over
# a stream still being read; the longer tail was most of the time the other workers waited for this test (53.8 s
# at 2,000 in the last durations run)
@pytest.mark.exclusive
async def test_worker_killed_mid_stream_loses_and_doubles_nothing(settings):
    total = 1000
    async with open_runtime(settings) as rt:  # publisher and reader only; the worker is a separate process
        await rt.bus.ensure_streams()
        worker = _worker_process(settings)
        try:
            await _publish_all(rt.bus, 0, total)
            await _wait_count(rt.engine, 300, timeout=60)
            worker.send_signal(signal.SIGKILL)
            worker.wait(timeout=10)
            killed_at = await _count(rt.engine)
            assert 0 < killed_at <= total // 2, "the kill must land in the middle of the stream"
            worker = _worker_process(settings)
            assert await _wait_count(rt.engine, total, timeout=240) == total
            assert await worker_settled(rt.bus)  # nothing left to redeliver
            assert await _count(rt.engine) == total
            assert await list_letters(rt.bus) == []
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()


async def test_nats_restart_while_publishing_and_consuming_loses_nothing(settings, own_nats_server):
    # 800, not 1,500: the restart starts once 200 are stored, with at least half still to come (asserted below);
    # what is proven (the worker and the publisher reconnect, nothing in flight is lost or stored twice) does not
    # depend on the length of the tail (57 s of a worker's CPU at 1,500 under load in the last durations run)
    total = 800
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"worker"}, task_status=task_status))

            restarted_at: list[int] = []

            async def restart_midway() -> None:
                await _wait_count(rt.engine, 200, timeout=60)
                restarted_at.append(await _count(rt.engine))
                await own_nats_server.restart_async()

            tg.start_soon(restart_midway)
            await _publish_all(rt.bus, 0, total)
            assert await _wait_count(rt.engine, total, timeout=180) == total
            assert await worker_settled(rt.bus)  # nothing left to redeliver
            assert await _count(rt.engine) == total
            assert restarted_at and restarted_at[0] <= total // 2, "the restart must land in the middle of the stream"
            rt.stop.set()


async def _consumer_exists(bus: Bus) -> bool:
    try:
        await bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
        return True
    except Exception:
        return False


async def test_worker_declares_stream_and_consumer_again_after_the_server_lost_its_store(settings, own_nats_server):
    import shutil

    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"worker"}, task_status=task_status))
            await _publish_all(rt.bus, 0, 20)
            assert await _wait_count(rt.engine, 20, timeout=30) == 20
            await anyio.to_thread.run_sync(own_nats_server.stop)
            shutil.rmtree(own_nats_server.store_dir)  # the server comes back with no streams and no consumer
            own_nats_server.spawn()  # on this thread: the server dies with the thread that forked it
            await anyio.to_thread.run_sync(own_nats_server.wait_ready)
            declared = False
            with anyio.move_on_after(30):
                while not (declared := await _consumer_exists(rt.bus)):
                    await anyio.sleep(0.2)
            assert declared, "the worker never declared its consumer again"
            await _publish_all(rt.bus, 20, 40)
            assert await _wait_count(rt.engine, 40, timeout=30) == 40
            assert rt.metrics.worker_fetch_errors._metrics, "the outage was not counted"
            rt.stop.set()


async def test_a_publisher_declares_the_streams_again_when_no_stream_takes_its_episode(settings, own_nats_server):
    import shutil

    async with open_runtime(settings) as rt:
        await rt.bus.ensure_streams()
        await anyio.to_thread.run_sync(own_nats_server.stop)
        shutil.rmtree(own_nats_server.store_dir)
        own_nats_server.spawn()
        await anyio.to_thread.run_sync(own_nats_server.wait_ready)
        ep = _episode(0)
        with anyio.fail_after(20):
            while True:  # the client reconnects first
                try:
                    ack = await rt.bus.js_publish(subjects.episode(ep.group_id), ep.to_wire(), msg_id=ep.episode_id)
                    break
                except Exception:
                    await anyio.sleep(0.2)
        assert ack.stream == subjects.EPISODE_STREAM and ack.seq == 1
