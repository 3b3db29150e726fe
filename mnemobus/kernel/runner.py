"""Runs plugins: subscribe their routes in one task group, drain on stop.

Stopping is ordered: unsubscribe every route (no new work), wait for the
handlers in flight, then stop plugins in reverse order. Nothing a request
started is cut off by a SIGTERM.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio
from anyio.abc import TaskStatus

from mnemobus.bus.deadletter import DeadLetterPublisher
from mnemobus.bus.endpoint import Endpoint
from mnemobus.kernel.plugin import Plugin, PluginContext

log = logging.getLogger("mnemobus.runner")


async def run_plugins(
    plugins: Sequence[Plugin],
    ctx: PluginContext,
    stop: anyio.Event,
    *,
    task_status: TaskStatus[list[Endpoint]] = anyio.TASK_STATUS_IGNORED,
) -> None:
    dlq = DeadLetterPublisher(ctx.bus, ctx.metrics)
    started: list[Plugin] = []
    endpoints: list[Endpoint] = []
    async with anyio.create_task_group() as tg:
        ctx.spawn = tg.start_soon
        try:
            for plugin in plugins:
                await plugin.start(ctx)
                started.append(plugin)
                for route in plugin.router.routes:
                    ep = Endpoint(route, ctx.bus, ctx.metrics, dlq, tg, max_bytes=ctx.settings.nats.max_message_bytes)
                    await ep.start()
                    endpoints.append(ep)
                    log.info("plugin %s serves %s as %s (queue %s)", plugin.name, route.subject, route.name, route.queue)
            await ctx.bus.flush()
            task_status.started(endpoints)
            await stop.wait()
        finally:
            with anyio.CancelScope(shield=True):
                for ep in endpoints:
                    await ep.drain()
                for plugin in reversed(started):
                    try:
                        await plugin.stop()
                    except Exception:
                        log.exception("plugin %s failed to stop cleanly", plugin.name)
