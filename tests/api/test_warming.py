"""The memory API loads the recently written groups' recall indexes at start, as the plugin does, once a process."""

from __future__ import annotations

import functools

import anyio
import pytest

from mnemobus.api.service import run_api
from mnemobus.shared.config import ApiSettings
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.shared.config import Settings
from plugins.memory import MemoryPlugin
from tests.warming_support import until_warmed, write_groups_in_order

pytestmark = pytest.mark.anyio


def _warming(settings: Settings, groups: int) -> Settings:
    return settings.model_copy(update={"memory": settings.memory.model_copy(update={"warm_groups": groups})})


async def test_a_started_api_loads_the_recently_written_groups_before_their_first_search(settings: Settings) -> None:
    await write_groups_in_order(settings, "user_old", "user_new")
    async with open_runtime(_warming(settings, 1)) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(functools.partial(run_api, rt, api=ApiSettings(port=0, drain_timeout_s=2)))
            await until_warmed(rt.metrics)
            held = {g for g in ("user_old", "user_new") if rt.engine.store.graphs.cache.get(g) is not None}
            assert held == {"user_new"}  # the most recently written, and only as many as asked
            rt.stop.set()


async def test_a_started_api_loads_only_the_groups_its_prefix_names(settings: Settings) -> None:
    await write_groups_in_order(settings, "user_mine_old", "user_mine_new", "user_theirs")
    scoped = _warming(settings, 2)
    scoped = scoped.model_copy(update={"memory": scoped.memory.model_copy(update={"warm_groups_prefix": "user_mine_"})})
    async with open_runtime(scoped) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(functools.partial(run_api, rt, api=ApiSettings(port=0, drain_timeout_s=2)))
            await until_warmed(rt.metrics)
            held = {g for g in ("user_mine_old", "user_mine_new", "user_theirs")
                    if rt.engine.store.graphs.cache.get(g) is not None}
            assert held == {"user_mine_old", "user_mine_new"}  # the group written last is not its prefix's
            rt.stop.set()


async def test_a_process_serving_both_the_plugin_and_the_api_loads_the_indexes_once(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    await write_groups_in_order(settings, "user_old", "user_new")
    async with open_runtime(_warming(settings, 2)) as rt:
        claims: list[bool] = []
        real_claim = rt.engine.claim_warming

        def claim() -> bool:
            claims.append(real_claim())
            return claims[-1]

        monkeypatch.setattr(rt.engine, "claim_warming", claim)
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"plugin"}, plugins=[MemoryPlugin()], task_status=task_status))
            await tg.start(functools.partial(run_api, rt, api=ApiSettings(port=0, drain_timeout_s=2)))
            with anyio.fail_after(10):  # both roles have asked: a second load, were there one, is under way
                while len(claims) < 2:
                    await anyio.sleep(0.01)
            await until_warmed(rt.metrics)
            assert claims == [True, False]
            assert rt.metrics.warmed_groups._value.get() == 2
            assert rt.metrics.index_warms.labels(outcome="ok")._value.get() == 1
            rt.stop.set()
