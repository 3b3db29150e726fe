"""The event loop every command runs on, chosen in one place (`Settings.event_loop`).

A plugin process spends a good part of a request in the loop itself: waking on the socket, reading, scheduling
the handler's steps, writing the publishes. Requests that arrive one by one (the production pattern, and
bench-pipeline's CPU step) pay that wake-up for each; uvloop (libuv, the loop uvicorn prefers) does it in C.
Alternated on the plugin bench it took an enriched request's plugin CPU down in four of five pairs, and the
process's idle CPU by about a seventh (docs/performance.md). Where uvloop cannot be imported (no wheel for the
platform) the process says so once and runs on asyncio's own loop: the choice is about cost, never about
whether memory works.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import anyio

log = logging.getLogger("mnemobus.eventloop")

T = TypeVar("T")
LoopChoice = Literal["uvloop", "asyncio"]


def backend_options(choice: LoopChoice) -> dict[str, Any]:
    """anyio's asyncio-backend options for the chosen loop; asyncio's own when uvloop is not installed."""
    if choice != "uvloop":
        return {}
    try:
        import uvloop  # noqa: F401
    except ImportError:
        log.warning("event_loop is uvloop, but uvloop is not installed here: running on asyncio's own loop")
        return {}
    return {"use_uvloop": True}


def run(main: Callable[[], Awaitable[T]], choice: LoopChoice) -> T:
    """`anyio.run` on the chosen loop: how every command that serves, or talks to the bus, starts."""
    return anyio.run(main, backend_options=backend_options(choice))


def command(main: Callable[[Any, Any], Awaitable[T]]) -> Callable[[Any, Any], T]:
    """A subcommand's handler (settings, args) that runs `main(settings, args)` on the settings' loop."""
    return lambda settings, args: run(lambda: main(settings, args), settings.event_loop)


def running_loop_name() -> str:
    """The running loop as the start-up line names it: "uvloop" or "asyncio"."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
