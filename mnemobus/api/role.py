"""Registers the `api` role; the service itself (FastAPI, uvicorn) is imported only when the role starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from mnemobus.hooks import RoleStarter, hookimpl

if TYPE_CHECKING:
    from mnemobus.runtime import Runtime


async def start_api(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    from mnemobus.api.service import run_api

    await run_api(rt, task_status=task_status)


@hookimpl
def mnemobus_roles() -> dict[str, RoleStarter]:
    return {"api": start_api}
