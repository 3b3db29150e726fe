"""Registers the `api` and `mcp` roles; the services themselves (FastAPI, uvicorn, the MCP SDK) are imported only
when a role starts."""

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


async def start_mcp(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    from mnemobus.api.mcp_door import run_mcp_http

    await run_mcp_http(rt, task_status=task_status)


start_mcp.in_all = False  # type: ignore[attr-defined]  # it needs a token configured: `--role mcp` asks for it


@hookimpl
def mnemobus_roles() -> dict[str, RoleStarter]:
    return {"api": start_api, "mcp": start_mcp}
