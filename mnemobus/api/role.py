"""Registers the `api` and `mcp` roles; the services themselves (FastAPI, uvicorn, the MCP SDK) are imported only
when a role starts."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from mnemobus.kernel.hooks import RoleStarter, hookimpl

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime


async def _imported(module: str, name: str) -> Any:
    """Imported on a worker thread: FastAPI, uvicorn and the models take ~0.5 s to import, which on the event loop
    stalled the plugin's requests in the same process (its lag guard then skipped recall for them)."""
    return getattr(await anyio.to_thread.run_sync(importlib.import_module, module), name)


async def start_api(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    run_api = await _imported("mnemobus.api.service", "run_api")
    await run_api(rt, task_status=task_status)


async def start_mcp(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    run_mcp_http = await _imported("mnemobus.api.mcp_door", "run_mcp_http")
    await run_mcp_http(rt, task_status=task_status)


start_mcp.in_all = False  # type: ignore[attr-defined]  # it needs a token configured: `--role mcp` asks for it


@hookimpl
def mnemobus_roles() -> dict[str, RoleStarter]:
    return {"api": start_api, "mcp": start_mcp}
