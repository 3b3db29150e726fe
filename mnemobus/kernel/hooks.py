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
    from mnemobus.kernel.runtime import Runtime
    from mnemobus.shared.config import Settings
    from mnemobus.kernel.plugin import Plugin
    from mnemobus.engine.embed import Embedder
    from mnemobus.engine.extract import Extractor
    from mnemobus.shared.metrics import LlmMetrics
    from mnemobus.store.contract import GraphStore

PROJECT = "mnemobus"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["hookimpl", "RoleStarter", "PROJECT", "StoreFactory", "ExtractorFactory", "EmbedderFactory"]

#: starts a role inside the process's task group: `await tg.start(starter, runtime)`; it calls
#: `task_status.started()` once it serves and returns when `runtime.stop` is set. A starter whose attribute
#: `in_all` is False (it needs configuring first) is left out of `--role all`.
RoleStarter = Callable[..., Awaitable[None]]

#: builds the store `store.backend` names: `factory(settings, dim)`, not yet opened (the caller awaits `open()`)
StoreFactory = Callable[["Settings", int], "GraphStore"]
#: builds the extractor `extraction.extractor` names: `factory(settings, offline, llm_metrics)`; `offline` is the
#: rule extractor, for a factory that falls back to it
ExtractorFactory = Callable[["Settings", "Extractor", "LlmMetrics"], "Extractor"]
#: builds the embedder `memory.embedding.provider` names: `factory(settings, llm_metrics)`
EmbedderFactory = Callable[["Settings", "LlmMetrics"], "Embedder"]


@hookspec
def mnemobus_bus_plugins(settings: "Settings", demo: bool) -> "list[Plugin]":
    """Bus plugins the `plugin` role runs (`demo` is set by `mnemobus run --demo`)."""


@hookspec
def mnemobus_roles() -> dict[str, RoleStarter]:
    """Roles by the name `mnemobus run --role` takes (`plugin` and `worker` come in through this hook too)."""


@hookspec
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `mnemobus` subcommands; each sets `handler(settings, args) -> exit code` on its parser."""


@hookspec(firstresult=True)
def mnemobus_status_document(runtime: "Runtime") -> dict[str, Any] | None:
    """The world-state document the memory API serves as status; None when this process has none yet."""


@hookspec
def mnemobus_probe_domains() -> list[Callable[[Any], Any]]:
    """World-state probe domains: factories taking the poller's probe context and giving a named set of probes."""


@hookspec
def mnemobus_stores() -> dict[str, StoreFactory]:
    """Graph stores by the name `store.backend` takes (`sqlite` and `neo4j` come in through this hook too)."""


@hookspec
def mnemobus_extractors() -> dict[str, ExtractorFactory]:
    """Extractors by the name `extraction.extractor` takes (`offline`, `llm`)."""


@hookspec
def mnemobus_embedders() -> dict[str, EmbedderFactory]:
    """Embedders by the name `memory.embedding.provider` takes (`local`, `static`, `hash`, `openai`)."""
