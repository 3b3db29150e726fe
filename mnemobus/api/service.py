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
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from anyio.abc import TaskGroup, TaskStatus

from mnemobus.api.core import MemoryService
from mnemobus.api.http import create_app
from mnemobus.api.nats_service import NatsApi
from mnemobus.shared.errors import ConfigError
from mnemobus.shared.config import ApiSettings
from mnemobus.kernel.warming import warm_recall_indexes

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime

log = logging.getLogger("mnemobus.api")

#: Runtime.extra keys other parts (tests, the demo, the bench) read
EXTRA_URL = "api.http_url"
EXTRA_SERVICE = "api.service"


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the app owns SIGINT/SIGTERM and sets `rt.stop`."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's serve, and its listening sockets closed however it ends: cancelled mid-way (a task group
        torn down without waiting for the drain), uvicorn leaves them registered on the event loop, which then
        keeps the app, and through it the whole runtime, alive."""
        try:
            await super().serve(sockets)
        finally:
            for server in getattr(self, "servers", []):
                server.close()


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


async def start_http(tg: TaskGroup, app: Any, host: str, port: int, *, drain_timeout_s: float,
                     lifespan: str = "off") -> tuple[_Server, str]:
    """Serve an ASGI app on the task group; back once it accepts connections, with the server and its URL.
    Setting the server's `should_exit` stops it: no new connections, open requests finish, then it returns.

    With a lifespan, serving is shielded from the task group's cancellation (the caller must set `should_exit`
    however it ends, e.g. in a `finally`): cancelled mid-shutdown, uvicorn printed a CancelledError traceback
    from the lifespan's receive at every stop (issue 41)."""
    sock = bind(host, port)
    config = uvicorn.Config(app, lifespan=lifespan, access_log=False, log_level="warning",  # type: ignore[arg-type]
                            timeout_graceful_shutdown=drain_timeout_s)
    server = _Server(config)

    async def serve_to_the_end() -> None:
        with anyio.CancelScope(shield=True):
            await server.serve([sock])

    if lifespan == "off":
        tg.start_soon(server.serve, [sock])
    else:
        tg.start_soon(serve_to_the_end)
    try:
        while not server.started:
            if server.should_exit:
                raise OSError(f"could not serve HTTP on {host}:{port}")
            await anyio.sleep(0.005)
    except BaseException:  # cancelled while starting: a shielded server must still be told to stop
        server.should_exit = True
        raise
    bound_host, bound_port = sock.getsockname()[:2]
    return server, f"http://{bound_host if ':' not in bound_host else f'[{bound_host}]'}:{bound_port}"


def check_key_owners(svc: MemoryService) -> None:
    """Refuse to start with a key whose owner users.yaml does not know: its admin actions would all be 403."""
    for i, k in enumerate(svc.config.keys):
        if svc.rt.identity.user(k.owner) is None:
            raise ConfigError(f"api.keys[{i}].owner: {k.owner!r} is not a user in {svc.rt.settings.identity.users_file}")


async def run_api(rt: "Runtime", *, api: ApiSettings | None = None,
                  task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Serve until `rt.stop` is set, then drain."""
    svc = MemoryService.of(rt, api)
    check_key_owners(svc)
    rt.extra[EXTRA_SERVICE] = svc
    warming = anyio.CancelScope()

    async def warm() -> None:
        with warming:  # in the background: the API answers meanwhile, a group not yet loaded loads on first use
            await warm_recall_indexes(rt.engine, rt.settings.memory.warm_groups, rt.metrics,
                                      rt.settings.memory.warm_groups_prefix)

    async with anyio.create_task_group() as tg:
        tg.start_soon(warm)
        nats_api = NatsApi(svc, tg)
        await nats_api.start()
        server: _Server | None = None
        if svc.config.http:
            app = await anyio.to_thread.run_sync(create_app, svc)  # building the routes' models takes a while
            server, rt.extra[EXTRA_URL] = await start_http(tg, app, svc.config.host, svc.config.port,
                                                           drain_timeout_s=svc.config.drain_timeout_s)
            log.info("memory API on %s (Graphiti-compatible) and NATS memory.api.*", rt.extra[EXTRA_URL])
        task_status.started()
        await rt.stop.wait()
        warming.cancel()
        if server is not None:
            server.should_exit = True  # uvicorn stops accepting, finishes open requests, then returns
        await nats_api.stop()
