"""The worldstate role as the app starts it: ready after its first poll, stopped by the runtime's stop event."""

from __future__ import annotations

import anyio
import pytest

from mnemobus.kernel.app import open_runtime
from mnemobus.shared.config import Settings
from worldstate.poller import EXTRA_CONFIG, current_document, run_poller
from worldstate_support import shipped_config

pytestmark = pytest.mark.anyio


async def test_role_serves_a_document_once_started_and_returns_on_stop(settings: Settings) -> None:
    async with open_runtime(settings) as rt:
        rt.extra[EXTRA_CONFIG] = shipped_config()
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                await tg.start(run_poller, rt)
                document = current_document(rt)
                rt.stop.set()
    assert document is not None
    assert set(document["domains"]) == {"memory", "bus", "graph"}
    assert rt.metrics.registry.get_sample_value("mnemobus_worldstate_polls_total") >= 1
