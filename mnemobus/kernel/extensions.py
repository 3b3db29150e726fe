"""Loads what the hooks add: mnemobus's own command modules first, then every installed `mnemobus` entry point.

One manager per process, built on first use, so a CLI call, a role and a test all see the same set.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import functools
import logging
from typing import TYPE_CHECKING, Any

import pluggy

from mnemobus.kernel import hooks
from mnemobus.shared.errors import ConfigError, MnemobusError

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime
    from mnemobus.shared.config import Settings
    from mnemobus.kernel.plugin import Plugin

log = logging.getLogger("mnemobus.extensions")

#: the kernel's own hook implementations, loaded before any entry point
BUILTIN_MODULES = ("mnemobus.cli.run", "mnemobus.cli.doctor", "mnemobus.cli.dlq", "mnemobus.cli.migrate",
                   "mnemobus.cli.memory", "mnemobus.cli.cluster", "mnemobus.cli.mcp", "mnemobus.cli.nats_users",
                   "mnemobus.cli.graph", "mnemobus.cli.imports", "mnemobus.cli.backfill", "mnemobus.kernel.builtin_roles",
                   "mnemobus.api.role", "mnemobus.kernel.builtin_parts")


@functools.cache
def manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hooks.PROJECT)
    pm.add_hookspecs(hooks)
    for name in BUILTIN_MODULES:
        pm.register(__import__(name, fromlist=["_"]), name=name)
    loaded = pm.load_setuptools_entrypoints(hooks.PROJECT)
    log.debug("%d extension(s) from entry points", loaded)
    return pm


def bus_plugins(settings: "Settings", *, demo: bool) -> "list[Plugin]":
    return [p for batch in manager().hook.mnemobus_bus_plugins(settings=settings, demo=demo) for p in batch]


def demo_plugins(settings: "Settings") -> "list[Plugin]":
    """What the demo adds to the plugin role (the echo executor), without what always runs."""
    always = {p.name for p in bus_plugins(settings, demo=False)}
    return [p for p in bus_plugins(settings, demo=True) if p.name not in always]


def _named(hook: str, kind: str) -> dict[str, Any]:
    """One hook's name -> part maps merged in registration order (the kernel's own first); two packages claiming one
    name is refused rather than one silently winning."""
    found: dict[str, Any] = {}
    for impl in getattr(manager().hook, hook).get_hookimpls():
        for name, part in (impl.function() or {}).items():
            if name in found:
                raise MnemobusError(f"{kind} {name!r} is registered twice")
            found[name] = part
    return found


def roles() -> dict[str, hooks.RoleStarter]:
    return _named("mnemobus_roles", "role")


def stores() -> dict[str, hooks.StoreFactory]:
    return _named("mnemobus_stores", "store")


def extractors() -> dict[str, hooks.ExtractorFactory]:
    return _named("mnemobus_extractors", "extractor")


def embedders() -> dict[str, hooks.EmbedderFactory]:
    return _named("mnemobus_embedders", "embedder")


#: config field -> (what it names, the settings attribute path, the registry, the hook a package implements)
PART_FIELDS = (("store.backend", "store", ("store", "backend"), stores, "mnemobus_stores"),
               ("extraction.extractor", "extractor", ("extraction", "extractor"), extractors, "mnemobus_extractors"),
               ("memory.embedding.provider", "embedder", ("memory", "embedding", "provider"), embedders,
                "mnemobus_embedders"))


def check_parts(settings: "Settings", origin: Callable[[tuple[str, ...]], str] | None = None) -> None:
    """Every part the config names is registered; ConfigError naming the field, the known names and, given
    `origin(field path)` (config.field_origin), the file or environment variable that named it."""
    for field, kind, path, registry, hook in PART_FIELDS:
        value: Any = settings
        for attr in path:
            value = getattr(value, attr)
        known = registry()
        if value not in known:
            where = f"{origin(path)}: " if origin else ""
            raise ConfigError(f"{where}field '{field}': no {kind} is registered as {value!r} (known: "
                              f"{', '.join(sorted(known))}; a package adds one through the {hook} hook)")


def add_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """In the order the implementations were registered, so `--help` lists the built-in commands first."""
    for impl in manager().hook.mnemobus_commands.get_hookimpls():
        impl.function(subcommands=subcommands)


def status_document(runtime: "Runtime") -> dict[str, Any] | None:
    return manager().hook.mnemobus_status_document(runtime=runtime)


def probe_domains() -> list[Any]:
    return [f for batch in manager().hook.mnemobus_probe_domains() for f in batch]
