"""Declare handlers, don't wire them: a plugin module owns one Router.

The runner turns each declared route into an Endpoint; nothing outside
`bus/` subscribes to NATS directly.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
HandlerFn = Callable[[Any, "Any"], Awaitable[BaseModel | None]]


@dataclass(frozen=True)
class Route:
    subject: str
    model: type[BaseModel]
    handler: HandlerFn
    name: str
    queue: str
    max_inflight: int


class Router:
    def __init__(self, name: str) -> None:
        self.name = name
        self.routes: list[Route] = []

    def subscriber(
        self,
        subject: str,
        *,
        model: type[BaseModel],
        queue: str | None = None,
        name: str | None = None,
        max_inflight: int = 256,
    ) -> Callable[[HandlerFn], HandlerFn]:
        """Register `fn(message: model, ctx: MessageContext)`; its return value is the reply."""
        if not subject or " " in subject:
            raise ValueError(f"invalid subject {subject!r}")

        def register(fn: HandlerFn) -> HandlerFn:
            self.routes.append(Route(subject, model, fn, name or fn.__name__, queue or self.name, max_inflight))
            return fn

        return register
