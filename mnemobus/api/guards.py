"""The HTTP API's last line of defence: an exception that escapes a handler becomes a JSON 500.

It sits outside FastAPI's routing, inside Starlette's ServerErrorMiddleware,
because that middleware re-raises into the server after answering, and the
server then dropped the keep-alive connection: the client's next request failed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("mnemobus.api.http")


def json_bytes(body: Any) -> bytes:
    """JSON that can always be encoded: a lone surrogate a client sent is escaped, not a reason to fail."""
    return json.dumps(body, ensure_ascii=True, separators=(",", ":"), default=str).encode("ascii")


class ErrorGuard:
    """Answers any exception a handler let escape with `{"detail": "internal error: <kind>"}` and status 500."""

    def __init__(self, app: ASGIApp, *, on_error: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        except Exception as exc:  # noqa: BLE001 - logged, counted and answered here
            if started:  # already answered (the body limit's 413 ends this way): nothing left to say
                raise
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            if self.on_error is not None:
                self.on_error(type(exc).__name__)
            body = json_bytes({"detail": f"internal error: {type(exc).__name__}"})
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
