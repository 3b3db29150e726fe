"""The whole extension surface: every way a package adds to mnemobus is one hook below; nothing else is.

A package implements any of them with `@hookimpl` in a module it names under the `mnemobus` entry-point
group (`[project.entry-points.mnemobus]` in its pyproject). The built-ins (`plugins.memory`, `plugins.echo`,
`worldstate`) are registered exactly that way, which is why the kernel never imports them.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from mnemobus.runtime import Runtime
    from mnemobus.config import Settings
    from mnemobus.plugin import Plugin

PROJECT = "mnemobus"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["hookimpl", "RoleStarter", "PROJECT"]

#: starts a role inside the process's task group: `await tg.start(starter, runtime)`; it calls
#: `task_status.started()` once it serves and returns when `runtime.stop` is set. A starter whose attribute
#: `in_all` is False (it needs configuring first) is left out of `--role all`.
RoleStarter = Callable[..., Awaitable[None]]


@hookspec
def mnemobus_bus_plugins(settings: "Settings", demo: bool) -> "list[Plugin]":
    """Bus plugins the `plugin` role runs (`demo` is set by `mnemobus run --demo`)."""


@hookspec
def mnemobus_roles() -> dict[str, RoleStarter]:
    """Roles beyond `plugin` and `worker`, by the name `mnemobus run --role` takes."""


@hookspec
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `mnemobus` subcommands; each sets `handler(settings, args) -> exit code` on its parser."""


@hookspec(firstresult=True)
def mnemobus_status_document(runtime: "Runtime") -> dict[str, Any] | None:
    """The world-state document the memory API serves as status; None when this process has none yet."""


@hookspec
def mnemobus_probe_domains() -> list[Callable[[Any], Any]]:
    """World-state probe domains: factories taking the poller's probe context and giving a named set of probes."""
