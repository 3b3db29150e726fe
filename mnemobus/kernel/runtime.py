"""What a running process holds, apart from how it is assembled (app.py), so that roles and hooks can name it
without importing the assembly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from mnemobus.bus.connection import Bus
from mnemobus.bus.server import EmbeddedNatsServer
from mnemobus.shared.config import Settings
from mnemobus.shared.identity import IdentityRegistry
from mnemobus.shared.metrics import PipelineMetrics
from mnemobus.kernel.plugin import Plugin
from mnemobus.kernel.worker import EpisodeWorker


@dataclass
class Runtime:
    """What a running process holds; tests and the demo reach in through it."""

    settings: Settings
    bus: Bus
    metrics: PipelineMetrics
    identity: IdentityRegistry
    engine: Any
    stop: anyio.Event
    server: EmbeddedNatsServer | None = None
    url: str = ""
    worker: EpisodeWorker | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: what the `plugin` role runs (None: every registered bus plugin) and where roles narrate (None: nowhere)
    plugins: list[Plugin] | None = None
    echo: Callable[[str], None] | None = None
