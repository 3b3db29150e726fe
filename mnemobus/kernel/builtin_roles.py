"""The `worker` and `plugin` roles, registered through `mnemobus_roles` like every other role, so `--role`,
`all` and `serve` know no role by name. Registered before the api role: the worker then starts first and is
consuming before anything queues an episode."""

from __future__ import annotations

import logging
import os
import socket
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from mnemobus.kernel import extensions
from mnemobus.kernel.hooks import RoleStarter, hookimpl
from mnemobus.kernel.plugin import PluginContext
from mnemobus.kernel.runner import run_plugins
from mnemobus.kernel.worker import EpisodeWorker

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime


async def start_worker(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    rt.worker = EpisodeWorker(rt.bus, rt.engine, rt.settings, rt.metrics,
                              instance_id=f"{socket.gethostname()}-{os.getpid()}", echo=rt.echo)
    await rt.worker.run(rt.stop, task_status=task_status)


async def start_plugin(rt: "Runtime", *, task_status: TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> None:
    """The bus plugins `rt.plugins` names (set by the caller: the demo's add the echo executor), else every
    registered one."""
    ctx = PluginContext(rt.bus, rt.settings, rt.metrics, logging.getLogger("mnemobus.plugin"), rt.identity,
                        rt.engine, rt.echo)
    plugins = rt.plugins if rt.plugins is not None else extensions.bus_plugins(rt.settings, demo=False)
    await run_plugins(plugins, ctx, rt.stop, task_status=task_status)


@hookimpl
def mnemobus_roles() -> dict[str, RoleStarter]:
    return {"worker": start_worker, "plugin": start_plugin}
