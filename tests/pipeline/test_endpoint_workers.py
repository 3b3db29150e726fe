"""An endpoint runs its handler on workers it keeps: a burst still runs at once, up to the route's limit, messages one
after another reuse one worker, stopping ends them all (the runner returns), and a message whose handler is cancelled
is still counted and frees its slot."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
import pytest

from mnemobus.bus.deadletter import DeadLetterPublisher
from mnemobus.bus.endpoint import Endpoint, MessageContext
from mnemobus.bus.router import Router
from mnemobus.kernel.app import open_runtime
from mnemobus.kernel.plugin import PluginContext
from mnemobus.kernel.runner import run_plugins
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import WireModel

pytestmark = pytest.mark.anyio

SUBJECT = "test.endpoint.workers"
LIMIT = 3


class Ping(WireModel):
    n: int


class Held:
    """A handler that holds every message until released, and says how many it holds."""

    name = "held"

    def __init__(self) -> None:
        self.router = Router("held")
        self.router.subscriber(SUBJECT, model=Ping, max_inflight=LIMIT)(self.on_ping)
        self.holding = 0
        self.most = 0
        self.release = anyio.Event()

    async def start(self, ctx: PluginContext) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def on_ping(self, ping: Ping, mctx: MessageContext) -> Ping:
        self.holding += 1
        self.most = max(self.most, self.holding)
        try:
            await self.release.wait()
        finally:
            self.holding -= 1
        return ping


@contextlib.asynccontextmanager
async def serving(settings: Settings, plugin: Held) -> AsyncIterator[tuple[object, Endpoint]]:
    async with open_runtime(settings, need_engine=False) as rt:
        ctx = PluginContext(rt.bus, settings, rt.metrics, logging.getLogger("test.endpoint"), rt.identity)
        async with anyio.create_task_group() as tg:
            (endpoint,) = await tg.start(run_plugins, [plugin], ctx, rt.stop)
            try:
                yield rt, endpoint
            finally:  # a failed test still stops: nothing held, the runner drains and returns
                plugin.release.set()
                rt.stop.set()


async def ping(rt, n: int) -> int:
    msg = await rt.bus.request(SUBJECT, Ping(n=n).to_wire(), timeout_s=10)
    return Ping.model_validate_json(msg.data).n


async def test_a_burst_runs_at_once_up_to_the_routes_limit_and_every_message_is_answered(settings):
    plugin = Held()
    answered: list[int] = []
    async with serving(settings, plugin) as (rt, endpoint):
        async with anyio.create_task_group() as tg:
            for n in range(LIMIT + 2):
                tg.start_soon(_ask, rt, n, answered)
            with anyio.fail_after(10):
                while plugin.holding < LIMIT:
                    await anyio.sleep(0.01)
            await anyio.sleep(0.3)  # the two over the limit wait in the subscription, not in a handler
            assert plugin.holding == LIMIT
            plugin.release.set()
        assert endpoint.workers == LIMIT
    assert plugin.most == LIMIT
    assert sorted(answered) == list(range(LIMIT + 2))


async def _ask(rt, n: int, answered: list[int]) -> None:
    answered.append(await ping(rt, n))


async def test_messages_one_after_another_are_all_handled_by_one_worker(settings):
    plugin = Held()
    plugin.release.set()
    async with serving(settings, plugin) as (rt, endpoint):
        assert [await ping(rt, n) for n in range(20)] == list(range(20))
        assert endpoint.workers == 1


async def test_stopping_ends_every_worker_and_the_runner_returns(settings):
    plugin = Held()
    with anyio.fail_after(20):
        async with serving(settings, plugin) as (rt, endpoint):
            async with anyio.create_task_group() as tg:
                for n in range(LIMIT):
                    tg.start_soon(ping, rt, n)
                while plugin.holding < LIMIT:
                    await anyio.sleep(0.01)
                plugin.release.set()
    assert endpoint.workers == 0



async def test_a_message_whose_handler_is_cancelled_frees_its_slot_and_is_counted_abandoned(settings):
    """A runner cancelled without draining (a drain past its timeout, a crash around it): the handler never returns,
    and its message still frees its slot and is counted, or the next drain would wait for it to its timeout."""
    plugin = Held()  # never released: the message is in its handler when the runner is cancelled
    (route,) = plugin.router.routes
    async with open_runtime(settings, need_engine=False) as rt:
        async with anyio.create_task_group() as tg:
            endpoint = Endpoint(route, rt.bus, rt.metrics, DeadLetterPublisher(rt.bus, rt.metrics), tg, max_bytes=10_000)
            await endpoint.start()
            await rt.bus.publish(SUBJECT, Ping(n=1).to_wire())
            with anyio.fail_after(10):
                while plugin.holding == 0:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
        abandoned = rt.metrics.messages.labels(endpoint=route.name, outcome="abandoned")._value.get()
        assert (abandoned, plugin.holding, endpoint.workers, endpoint.limiter.borrowed_tokens) == (1, 0, 0, 0)
        with anyio.fail_after(5):
            await endpoint.drain(timeout_s=30)  # nothing in flight: returns at once
