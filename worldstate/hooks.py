"""What world state adds to mnemobus, through the same hooks an outside package uses: the `worldstate` role,
the `status` command, its built-in probe domains, and the status document the memory API serves."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from mnemobus.kernel.hooks import RoleStarter, hookimpl

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime


async def start_poller(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    from worldstate.poller import run_poller

    await run_poller(rt, task_status=task_status)


@hookimpl
def mnemobus_roles() -> dict[str, RoleStarter]:
    return {"worldstate": start_poller}


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    from worldstate.cli import add_status_command

    add_status_command(subcommands)


@hookimpl
def mnemobus_probe_domains() -> list[Any]:
    from worldstate.graph_probes import graph_domain
    from worldstate.probes import BUILTIN_DOMAINS

    return [*BUILTIN_DOMAINS, graph_domain]


@hookimpl
def mnemobus_status_document(runtime: "Runtime") -> dict[str, Any] | None:
    from worldstate.poller import current_document

    return current_document(runtime)
