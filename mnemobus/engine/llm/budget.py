"""A token budget per hour for the LLM extractor: past it, episodes go to the offline extractor.

Why a budget: a paid endpoint bills per token and a backlog (a worker catching up
after an outage, a chatty bot) can turn into a large bill within the hour. The
budget is a bucket of `tokens_per_hour` that refills continuously at that rate,
so spending is capped over any hour, not per clock hour. A call is allowed while
its estimate fits; what it really cost (the endpoint's usage figures) is taken
afterwards. Concurrent calls may overshoot by at most one call each.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBudget:
    def __init__(self, tokens_per_hour: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.tokens_per_hour = tokens_per_hour
        self._clock = clock
        self._tokens = float(tokens_per_hour)
        self._at = clock()

    @property
    def enabled(self) -> bool:
        return self.tokens_per_hour > 0

    def remaining(self) -> float:
        """Tokens that may be spent now (may be below zero after an overshoot); infinite without a budget."""
        if not self.enabled:
            return float("inf")
        now = self._clock()
        self._tokens = min(float(self.tokens_per_hour), self._tokens + (now - self._at) * self.tokens_per_hour / 3600)
        self._at = now
        return self._tokens

    def allows(self, estimate: int) -> bool:
        return self.remaining() >= estimate

    def spend(self, tokens: int) -> None:
        if self.enabled:
            self.remaining()
            self._tokens -= tokens
