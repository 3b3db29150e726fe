"""A `nats.micro` service (queue group per endpoint, `$SRV.PING|INFO|STATS`) whose handlers may finish late.

Why here: the memory API hands each request to a task group and returns (nats-py runs a subscription's
callbacks one at a time), so the outcome and most of the time of a request are known only after the handler
returned; `record` adds them to the endpoint's `$SRV.STATS`. Everything that knows nats.micro lives here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import Service

from mnemobus.bus.connection import Bus

#: what a handler gets: `.data`, `.headers`, `await .respond(bytes)`, `await .respond_error(code, text)`
ServiceRequest = Request
Handler = Callable[[ServiceRequest], Awaitable[None]]


def reply_subject(req: ServiceRequest) -> str:
    """Where `req.respond` would publish (nats.micro keeps the message's reply to itself)."""
    return req._msg.reply or ""  # noqa: SLF001


class MicroService:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._service: Service | None = None
        self._endpoints: dict[str, Any] = {}

    async def start(self, *, name: str, version: str, queue: str, description: str) -> None:
        self._service = await add_service(self.bus.nc, name=name, version=version, queue_group=queue,
                                          description=description)

    async def add_endpoint(self, name: str, subject: str, handler: Handler) -> None:
        if self._service is None:
            raise RuntimeError("add_endpoint() before start()")
        await self._service.add_endpoint(name=name.replace(".", "-"), subject=subject, handler=handler)  # micro names: no dots
        self._endpoints[name] = self._service._endpoints[-1]  # noqa: SLF001 - see record

    def record(self, name: str, elapsed_ns: int, error: str | None) -> None:
        """Finish `$SRV.STATS` for a request that ran after its handler returned.

        nats.micro measures the handler and counts an error only when it raises; it has no public setter for
        this, so its endpoint's counters are written directly: pinned by nats-py <3 and by the test that reads
        `$SRV.STATS` after error replies."""
        endpoint = self._endpoints.get(name)
        if endpoint is None:
            return
        endpoint._processing_time += elapsed_ns  # noqa: SLF001
        endpoint._average_processing_time = int(endpoint._processing_time / max(1, endpoint._num_requests))  # noqa: SLF001
        if error is not None:
            endpoint._num_errors += 1  # noqa: SLF001
            endpoint._last_error = error  # noqa: SLF001

    async def stop(self) -> None:
        if self._service is not None:
            await self._service.stop()
