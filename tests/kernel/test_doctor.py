"""What `mnemobus doctor` says beyond pass and fail: who stores the episodes of its bus, what waits for an operator,
and a store that cannot check its own files (Neo4j has its own tools for that)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from mnemobus.bus.connection import Bus
from mnemobus.bus.deadletter import DeadLetterPublisher
from mnemobus.kernel.doctor import _integrity, doctor
from mnemobus.kernel.peers import store_identity
from mnemobus.shared import subjects
from mnemobus.shared.config import Settings
from mnemobus.shared.metrics import PipelineMetrics

pytestmark = pytest.mark.anyio


async def test_a_store_without_an_integrity_check_is_said_to_be_unchecked_and_fails_nothing() -> None:
    said: list[str] = []
    assert await _integrity(object(), repair=True, say=said.append) == 0
    assert said == ["store integrity: not checked by doctor (Neo4j checks its own: `neo4j-admin database check`)"]


async def test_doctor_on_a_bus_nobody_works_says_so_without_failing(settings: Settings) -> None:
    said: list[str] = []
    assert await doctor(settings, smoke=False, say=said.append) == 0, said
    assert any(line.startswith("workers: none beating on this bus") for line in said), said
    assert "dead letters: none" in said


async def test_doctor_names_the_workers_store_and_the_dead_letters_waiting(settings: Settings) -> None:
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="doctor-test")
    try:
        mine = store_identity(settings.store)
        await bus.put_key(subjects.HEARTBEAT_BUCKET, subjects.heartbeat_key("worker", "w1"), json.dumps(
            {"role": "worker", "instance": "w1", "beat_at": datetime.now(timezone.utc).isoformat(), "store": mine,
             "every_s": 5}).encode())
        await bus.ensure_streams()
        await DeadLetterPublisher(bus, PipelineMetrics()).send(
            reason="schema_error", error="missing field", original_subject="memory.episode.user_a", data=b"{}",
            group_id="user_a")
        said: list[str] = []
        assert await doctor(settings, smoke=False, say=said.append) == 0, said
    finally:
        await bus.close()
    assert f"workers: 1 beating, writing {mine}" in said, said
    assert any(line.startswith("dead letters: 1 waiting: `mnemobus dlq list`") for line in said), said
