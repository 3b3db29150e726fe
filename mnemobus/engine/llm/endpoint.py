"""One POST to an OpenAI-compatible endpoint, with timeouts, retries, backoff and metrics; the key never shown.

Why httpx and not the `openai` SDK: the wire is one documented JSON POST per call,
and what we must control is exactly what the SDK hides: its own retries (they would
make our retry and fallback counts wrong unless switched off), the non-standard
`response_format {"type": "json_object", "schema": ...}` that llama.cpp needs, and
a deadline on the whole call. httpx is already in the environment (tests, FastAPI's
test client), async and sync with one API, and well kept.

Retried: 429 (after its Retry-After when it names one, unless that is longer than
the longest backoff: then the episode goes to the offline extractor at once), 5xx,
timeouts and transport errors. Not retried: other 4xx (a bad key, a prompt too
long for the model's context) and a 2xx whose body is not the expected JSON.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from mnemobus.shared.metrics import LlmMetrics

log = logging.getLogger("mnemobus.llm")

RETRIABLE = frozenset({"rate_limited", "server_error", "timeout", "transport"})
_DETAIL_CHARS = 300


class EndpointError(Exception):
    """A call that did not give a usable answer; `outcome` is the metric label (rate_limited, timeout, ...)."""

    def __init__(self, outcome: str, detail: str, *, status: int | None = None, retry_after_s: float | None = None,
                 attempts: int = 1) -> None:
        super().__init__(f"{outcome}: {detail}")
        self.outcome = outcome
        self.detail = detail
        self.status = status
        self.retry_after_s = retry_after_s
        self.attempts = attempts


def outcome_of_status(status: int) -> str:
    if status == 429:
        return "rate_limited"
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "client_error"
    return "ok"


def retry_after_s(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Retry-After as seconds: a number of seconds or an HTTP date (RFC 9110); None when absent or unreadable."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 2
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0

    def delay(self, attempt: int, error: EndpointError) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to give up. Jittered so a burst does not stampede."""
        if error.outcome not in RETRIABLE or attempt > self.max_retries:
            return None
        if error.retry_after_s is not None:
            if error.retry_after_s > self.backoff_max_s:
                return None  # the server asks for longer than one episode may wait
            return error.retry_after_s + random.uniform(0, 0.1 * max(error.retry_after_s, self.backoff_base_s))
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


class Endpoint:
    """Base URL, auth header, retry policy and metrics of one endpoint (chat or embeddings); no connection state."""

    def __init__(self, base_url: str, path: str, *, label: str, api_key: str | None, timeout_s: float,
                 connect_timeout_s: float, retry: RetryPolicy, metrics: LlmMetrics) -> None:
        self.url = base_url.rstrip("/") + path
        self.label = label
        self._api_key = api_key or None
        self.timeout_s = timeout_s
        self.timeout = httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
        self.retry = retry
        self.metrics = metrics

    def __repr__(self) -> str:  # the key stays out of every repr, traceback and log line
        return f"Endpoint({self.url!r}, label={self.label!r}, key={'set' if self._api_key else 'none'})"

    @property
    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        return h

    def redact(self, text: str) -> str:
        """A server may echo what it was sent (an error body quoting the key): never let that reach a log."""
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "[redacted]")
        return text

    def judge(self, response: httpx.Response) -> dict[str, Any]:
        """The JSON body of a 2xx, or the EndpointError the response amounts to."""
        outcome = outcome_of_status(response.status_code)
        if outcome != "ok":
            body = self.redact(response.text[:_DETAIL_CHARS])
            raise EndpointError(outcome, f"HTTP {response.status_code}: {body}", status=response.status_code,
                                retry_after_s=retry_after_s(response.headers) if outcome == "rate_limited" else None)
        try:
            data = response.json()
        except ValueError as exc:
            raise EndpointError("bad_response", f"the body is not JSON: {self.redact(response.text[:80])!r}",
                                status=response.status_code) from exc
        if not isinstance(data, dict):
            raise EndpointError("bad_response", f"the body is a JSON {type(data).__name__}, not an object",
                                status=response.status_code)
        return data

    def failure(self, exc: BaseException) -> EndpointError:
        """A transport-level exception as the EndpointError it counts as."""
        if isinstance(exc, EndpointError):
            return exc
        if isinstance(exc, TimeoutError | httpx.TimeoutException):
            return EndpointError("timeout", f"no answer within {self.timeout_s:g} s")
        return EndpointError("transport", self.redact(f"{type(exc).__name__}: {exc}")[:_DETAIL_CHARS])

    def settle(self, attempt: int, started: float, error: EndpointError | None) -> float | None:
        """Count one finished attempt; for a failure, the delay before the next one (None: give up)."""
        self.metrics.call_seconds.labels(endpoint=self.label).observe(time.perf_counter() - started)
        self.metrics.calls.labels(endpoint=self.label, outcome=error.outcome if error else "ok").inc()
        if error is None:
            return None
        error.attempts = attempt
        delay = self.retry.delay(attempt, error)
        if delay is not None:
            self.metrics.retries.labels(endpoint=self.label, reason=error.outcome).inc()
            log.info("%s call to %s failed (%s); retry %d in %.2f s", self.label, self.url, error.detail, attempt,
                     delay)
        return delay

    def post_sync(self, client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
        """For callers on a worker thread (the Embedder protocol is synchronous)."""
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                data = self.judge(client.post(self.url, json=body, headers=self.headers, timeout=self.timeout))
            except (EndpointError, httpx.HTTPError, TimeoutError) as exc:
                error = self.failure(exc)
                delay = self.settle(attempt, started, error)
                if delay is None:
                    raise error from exc
                time.sleep(delay)
                continue
            self.settle(attempt, started, None)
            return data
