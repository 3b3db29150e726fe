"""The store check a process makes before it starts beside the workers of its bus (kernel/peers.py), against a real
nats-server: a worker that is only late must not be taken for gone."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone

import anyio
import pytest
from nats.js.kv import KeyValue

from mnemobus.bus.connection import Bus
from mnemobus.kernel import peers
from mnemobus.kernel.peers import DifferentStore, check_same_store
from mnemobus.shared import subjects
from mnemobus.shared.config import Settings

pytestmark = pytest.mark.anyio
ELSEWHERE = "sqlite:/somewhere/else.sqlite3"


async def beat(bus: Bus, *, ago_s: float, every_s: float, store: str = ELSEWHERE) -> None:
    """The heartbeat a worker writes (kernel/worker.py), as if written `ago_s` seconds ago."""
    at = datetime.now(timezone.utc) - timedelta(seconds=ago_s)
    await bus.put_key(subjects.HEARTBEAT_BUCKET, subjects.heartbeat_key("worker", "w1"), json.dumps(
        {"role": "worker", "instance": "w1", "beat_at": at.isoformat(), "store": store, "every_s": every_s}).encode())


async def test_a_worker_whose_last_beat_is_late_is_waited_for_and_its_other_store_refused(settings: Settings) -> None:
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="peers")
    try:
        await beat(bus, ago_s=4 * 0.5, every_s=0.5)  # past three intervals: not fresh, but not long gone either

        async def resumes() -> None:
            await anyio.sleep(0.3)
            await beat(bus, ago_s=0, every_s=0.5)

        async with anyio.create_task_group() as tg:
            tg.start_soon(resumes)
            with pytest.raises(DifferentStore, match="worker w1 on the same bus writes sqlite:/somewhere/else.sqlite3"):
                await check_same_store(bus, settings.store)
    finally:
        await bus.close()


async def test_a_late_worker_that_never_beats_again_is_taken_for_gone(
        settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="peers")
    try:
        await beat(bus, ago_s=4 * 0.2, every_s=0.2)
        with caplog.at_level(logging.INFO, logger=peers.log.name):
            await check_same_store(bus, settings.store)
        assert "waiting up to 0.4 s for its next beat" in caplog.text and "taken for gone" in caplog.text
    finally:
        await bus.close()


async def test_a_beat_long_past_is_not_waited_for(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="peers")
    try:
        await beat(bus, ago_s=3600, every_s=5)
        with caplog.at_level(logging.INFO, logger=peers.log.name):
            await check_same_store(bus, settings.store)
        assert "waiting" not in caplog.text and "no worker is beating on this bus yet" in caplog.text
    finally:
        await bus.close()


@pytest.mark.parametrize("read", ["bucket", "beat"])
async def test_a_heartbeat_read_that_fails_once_is_made_again_and_the_other_store_refused(
        settings: Settings, monkeypatch: pytest.MonkeyPatch, read: str) -> None:
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="peers")
    try:
        await beat(bus, ago_s=0, every_s=0.5)
        owner, name = (bus.js, "key_value") if read == "bucket" else (KeyValue, "get")
        real, calls = getattr(owner, name), []

        async def fails_once(*args):  # type: ignore[no-untyped-def]
            calls.append(args)
            if len(calls) == 1:  # as a JetStream API request that timed out on a loaded machine
                raise TimeoutError("nats: timeout")
            return await real(*args)

        monkeypatch.setattr(owner, name, fails_once)
        monkeypatch.setattr(peers, "READ_RETRY_S", 0.01)
        with pytest.raises(DifferentStore, match="worker w1 on the same bus writes sqlite:/somewhere/else.sqlite3"):
            await check_same_store(bus, settings.store)
        assert len(calls) >= 2
    finally:
        await bus.close()


@pytest.fixture
async def unreadable(settings: Settings, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A bus whose heartbeat bucket never answers in time."""
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="peers")

    async def never(bucket: str):  # type: ignore[no-untyped-def]
        raise TimeoutError("nats: timeout")

    monkeypatch.setattr(bus.js, "key_value", never)
    monkeypatch.setattr(peers, "READ_RETRY_S", 0.01)
    try:
        yield bus
    finally:
        await bus.close()


async def test_heartbeats_that_cannot_be_read_are_said_in_a_warning_not_taken_for_no_worker(
        unreadable: Bus, settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=peers.log.name):
        await check_same_store(unreadable, settings.store)
    assert f"could not read the workers' heartbeats (TimeoutError: nats: timeout) in {peers.READ_ATTEMPTS} tries" \
        in caplog.text


async def test_a_check_that_could_not_read_the_heartbeats_is_counted(unreadable: Bus, settings: Settings) -> None:
    counted: list[None] = []
    await check_same_store(unreadable, settings.store, unread=lambda: counted.append(None))
    assert len(counted) == 1


async def test_the_heartbeat_keys_are_read_in_one_request_without_a_consumer_that_could_race_it(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's `keys()` watches through a new consumer whose message can arrive after the server says nothing
    is pending, and then answers "no keys": a live worker, taken for none, let an MCP role start on a store of its own
    (a full test run, 2026-11-29)."""
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="peers")
    try:
        await beat(bus, ago_s=0, every_s=0.5)
        consumers: list[object] = []
        real_subscribe = bus.js.subscribe

        async def subscribe(*args, **kwargs):  # type: ignore[no-untyped-def]
            consumers.append(args)
            return await real_subscribe(*args, **kwargs)

        monkeypatch.setattr(bus.js, "subscribe", subscribe)
        assert await bus.key_names(subjects.HEARTBEAT_BUCKET) == ["worker.w1"]
        with pytest.raises(DifferentStore, match="worker w1 on the same bus writes"):
            await check_same_store(bus, settings.store)
        assert consumers == []
    finally:
        await bus.close()


async def test_a_bus_without_a_heartbeat_bucket_has_no_worker(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="peers")
    try:
        with caplog.at_level(logging.INFO, logger=peers.log.name):
            await check_same_store(bus, settings.store)
        assert "no worker is beating on this bus yet" in caplog.text
    finally:
        await bus.close()
