"""Roles beyond plugin and worker, started only when asked for and present."""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from anyio.abc import TaskGroup

from mnemobus.errors import MnemobusError

if TYPE_CHECKING:
    from mnemobus.app import Runtime

log = logging.getLogger("mnemobus.roles")

#: role -> (module, coroutine function taking (runtime) and a task_status)
OPTIONAL_ROLES = {
    "worldstate": ("worldstate.poller", "run_poller"),
    "api": ("mnemobus.api.service", "run_api"),
}


def role_available(role: str) -> bool:
    module, func = OPTIONAL_ROLES[role]
    try:
        return hasattr(importlib.import_module(module), func)
    except ImportError:
        return False


async def start_optional_roles(tg: TaskGroup, rt: "Runtime", roles: set[str]) -> None:
    for role, (module, func) in OPTIONAL_ROLES.items():
        if role not in roles:
            continue
        if not role_available(role):
            raise MnemobusError(f"role {role!r} is not available in this build ({module}.{func} is missing)")
        await tg.start(getattr(importlib.import_module(module), func), rt)
