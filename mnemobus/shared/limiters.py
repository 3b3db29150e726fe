"""Taking a capacity limiter's token without giving the event loop away when one is free."""

from __future__ import annotations

import anyio


async def acquire_at_once(limiter: anyio.CapacityLimiter, borrower: object | None = None) -> None:
    """A free token at once; wait only when none is free. `borrower`: who holds it (default: the current task).

    Why: anyio's `acquire` yields to the loop even when a token is free. A burst handed over at once then let every
    message of it take its turn before any ran: the endpoint fed a backlog in one message per turn of the loop,
    unmeasured, and the plugin's recall slots filled with requests that were then skipped, though on the loop their
    recalls run one after another well inside the deadline (docs/performance.md, overload).
    """
    try:
        if borrower is None:
            limiter.acquire_nowait()
        else:
            limiter.acquire_on_behalf_of_nowait(borrower)
    except anyio.WouldBlock:
        await (limiter.acquire() if borrower is None else limiter.acquire_on_behalf_of(borrower))
