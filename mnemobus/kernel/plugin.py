"""The plugin surface: a plugin declares routes and gets a context.

Built-ins (the memory plugin, the echo executor) use exactly this surface;
there is no second way in. `__all__` is the public API a plugin author may
rely on across releases: the protocol and context, the router and what a
handler receives, the wire models and the bus's errors; with `mnemobus.kernel.hooks.__all__` (the
marker that registers a plugin, a role, a command or a probe domain) that is
all. Everything else in mnemobus may change without notice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.endpoint import MessageContext
from mnemobus.bus.errors import BusError, NoResponders, RequestTimeout
from mnemobus.bus.router import Router
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import (EnrichedRequest, EpisodeMessage, ErrorReply, MemoryContext, SkillRequest,
                               SkillResponse, WireModel)
from mnemobus.shared.errors import ConfigError, InvalidMessage, MnemobusError
from mnemobus.shared.metrics import PipelineMetrics

__all__ = [
    "Plugin", "PluginContext", "Router", "MessageContext", "subjects",
    "SkillRequest", "EnrichedRequest", "SkillResponse", "MemoryContext", "EpisodeMessage", "ErrorReply", "WireModel",
    "Bus", "BusError", "NoResponders", "RequestTimeout", "Settings", "PipelineMetrics",
    "MnemobusError", "ConfigError", "InvalidMessage",
]

if TYPE_CHECKING:
    from mnemobus.engine import MemoryEngine
    from mnemobus.shared.identity import IdentityRegistry


@dataclass
class PluginContext:
    bus: Bus
    settings: Settings
    metrics: PipelineMetrics
    log: logging.Logger
    identity: "IdentityRegistry"
    engine: "MemoryEngine | None" = None
    echo: Any = None  # a callable(str) that narrates for `make run`; None when quiet
    spawn: Any = None  # set by the runner: start a background task that lives until the plugin stops


@runtime_checkable
class Plugin(Protocol):
    name: str
    router: Router

    async def start(self, ctx: PluginContext) -> None:
        """Called once before any route is subscribed."""

    async def stop(self) -> None:
        """Called after every route has drained."""
