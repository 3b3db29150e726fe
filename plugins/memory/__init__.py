"""The memory plugin: request -> recall -> executor, and every exchange out as an episode."""

from __future__ import annotations

from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from plugins.memory.plugin import MemoryPlugin

__all__ = ["MemoryPlugin"]


@hookimpl
def mnemobus_bus_plugins(settings: Settings, demo: bool) -> list[MemoryPlugin]:
    return [MemoryPlugin()]
