"""An ack the bus does not confirm (a frozen or lost server) is an outage, not a bug: counted by kind and said in a
throttled warning without a traceback; the message stays in the stream and comes back to be found stored."""

from __future__ import annotations

import logging

import anyio
import nats.errors
import pytest

from mnemobus.bus.consumer import Delivery
from mnemobus.kernel.app import open_runtime
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import EpisodeMessage
from tests.pipeline.test_worker_stop import storing_one

pytestmark = pytest.mark.anyio


async def test_an_ack_the_bus_does_not_confirm_is_counted_and_warned_without_a_traceback(
        settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    acked = Delivery.ack

    async def lost(self: Delivery) -> None:  # the server takes the ack's request and never answers
        async def times_out(timeout: float) -> None:
            raise nats.errors.TimeoutError

        self._msg.ack_sync = times_out
        await acked(self)

    monkeypatch.setattr(Delivery, "ack", lost)
    ep = EpisodeMessage(episode_id="unconfirmed-1", group_id="user_josh", content="I live in Oslo.",
                        source_message_id="u1")
    async with open_runtime(settings) as rt:
        stop = anyio.Event()
        with caplog.at_level(logging.WARNING, logger="mnemobus"):
            async with storing_one(rt, ep, stop):
                counted = rt.metrics.worker_settle_errors.labels(kind="TimeoutError")
                with anyio.fail_after(30):
                    while counted._value.get() < 1:
                        await anyio.sleep(0.02)
                stop.set()
    said = [r for r in caplog.records if "did not confirm settling" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING and said[0].exc_info is None
    assert "TimeoutError" in said[0].getMessage()
    assert rt.metrics.worker_settle_errors.labels(kind="unexpected")._value.get() == 0
