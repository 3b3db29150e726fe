"""The `api` role: the memory service on NATS and, unless switched off, on HTTP.

Started by the app inside its task group (the role is registered in `mnemobus.api.role`). It reports started
once both listeners accept requests, and when `rt.stop` is set it stops
taking new requests, lets the in-flight ones answer, and returns.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator

import anyio
import uvicorn
from anyio.abc import TaskStatus

from mnemobus.api.core import MemoryService
from mnemobus.api.http import create_app
from mnemobus.api.nats_service import NatsApi
from mnemobus.config import ApiSettings
from mnemobus.warming import warm_recall_indexes

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnemobus.runtime import Runtime

log = logging.getLogger("mnemobus.api")

#: Runtime.extra keys other parts (tests, the demo, the bench) read
EXTRA_URL = "api.http_url"
EXTRA_SERVICE = "api.service"


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the app owns SIGINT/SIGTERM and sets `rt.stop`."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """Bind before serving, so a port of 0 is known before anyone is told the URL."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without it
    # every response waits ~40 ms for a delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


async def run_api(rt: "Runtime", *, api: ApiSettings | None = None,
                  task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Serve until `rt.stop` is set, then drain."""
    svc = MemoryService.of(rt, api)
    rt.extra[EXTRA_SERVICE] = svc
    warming = anyio.CancelScope()

    async def warm() -> None:
        with warming:  # in the background: the API answers meanwhile, a group not yet loaded loads on first use
            await warm_recall_indexes(rt.engine, rt.settings.memory.warm_groups, rt.metrics)

    async with anyio.create_task_group() as tg:
        tg.start_soon(warm)
        nats_api = NatsApi(svc, tg)
        await nats_api.start()
        server: _Server | None = None
        if svc.config.http:
            sock = bind(svc.config.host, svc.config.port)
            config = uvicorn.Config(create_app(svc), lifespan="off", access_log=False, log_level="warning",
                                    timeout_graceful_shutdown=svc.config.drain_timeout_s)
            server = _Server(config)
            tg.start_soon(server.serve, [sock])
            while not server.started:
                if server.should_exit:
                    raise OSError(f"HTTP API could not start on {svc.config.host}:{svc.config.port}")
                await anyio.sleep(0.005)
            host, port = sock.getsockname()[:2]
            rt.extra[EXTRA_URL] = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
            log.info("memory API on %s (Graphiti-compatible) and NATS memory.api.*", rt.extra[EXTRA_URL])
        task_status.started()
        await rt.stop.wait()
        warming.cancel()
        if server is not None:
            server.should_exit = True  # uvicorn stops accepting, finishes open requests, then returns
        await nats_api.stop()
