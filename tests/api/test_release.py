"""A stopped API lets go of its runtime: a process that opens and closes services (tests, the bench, an
embedding host) must not keep each one's store, caches and embedder alive."""

from __future__ import annotations

import functools
import gc
import weakref

import anyio
import httpx
import pytest

from mnemobus.api.service import EXTRA_URL, run_api
from mnemobus.kernel.app import open_runtime
from mnemobus.shared.config import ApiSettings, Settings

pytestmark = pytest.mark.anyio


async def _served_once(settings: Settings, *, drained: bool) -> weakref.ref:  # type: ignore[type-arg]
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(functools.partial(run_api, rt, api=ApiSettings(port=0)))
            async with httpx.AsyncClient(base_url=rt.extra[EXTRA_URL], timeout=10) as http:
                found = await http.post("/search", json={"group_ids": ["user_release"], "query": "anything"})
                assert found.status_code == 200, found.text
            if drained:
                rt.stop.set()
            else:
                tg.cancel_scope.cancel()  # torn down without waiting for the drain
        return weakref.ref(rt)


async def test_an_api_stopped_the_usual_way_leaves_nothing_of_its_runtime_alive(settings: Settings) -> None:
    released = await _served_once(settings, drained=True)
    gc.collect()
    assert released() is None


async def test_an_api_torn_down_without_draining_leaves_nothing_of_its_runtime_alive(settings: Settings) -> None:
    released = await _served_once(settings, drained=False)
    gc.collect()
    assert released() is None
