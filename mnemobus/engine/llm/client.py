"""An OpenAI-compatible chat client: one structured-output completion, its text and the tokens it cost.

Works against OpenAI, vLLM, Ollama, llama.cpp's server and gateways that speak
`POST {base_url}/chat/completions`. How the answer's shape is asked for differs
between servers (`structured_output`):

- `json_schema`: OpenAI's `response_format {"type": "json_schema", ...}` (OpenAI, vLLM, Ollama);
- `json_object_schema`: `{"type": "json_object", "schema": ...}`, the only form llama.cpp's servers
  enforce (they answer HTTP 500 to `json_schema`);
- `json_object`: plain JSON mode; the schema then travels in the prompt and only validation enforces it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import httpx

from mnemobus.engine.llm.endpoint import Endpoint, EndpointError, RetryPolicy
from mnemobus.shared.metrics import LlmMetrics

StructuredOutput = Literal["json_schema", "json_object_schema", "json_object"]


def response_format(mode: StructuredOutput, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    content: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    attempts: int


class ChatClient:
    """At most `concurrency` calls in flight; each attempt bounded by `timeout_s` as a whole (not per read)."""

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 60.0,
                 connect_timeout_s: float = 5.0, retry: RetryPolicy | None = None, concurrency: int = 2,
                 metrics: LlmMetrics | None = None) -> None:
        self.model = model
        self.metrics = metrics or LlmMetrics()
        self.endpoint = Endpoint(base_url, "/chat/completions", label="chat", api_key=api_key, timeout_s=timeout_s,
                                 connect_timeout_s=connect_timeout_s, retry=retry or RetryPolicy(),
                                 metrics=self.metrics)
        self._limiter = anyio.CapacityLimiter(concurrency)
        self._client: httpx.AsyncClient | None = None

    def __repr__(self) -> str:
        return f"ChatClient(model={self.model!r}, endpoint={self.endpoint!r})"

    async def complete(self, messages: Sequence[dict[str, str]], *, response_format: dict[str, Any],
                       max_tokens: int, temperature: float = 0.0) -> ChatAnswer:
        """The first choice's text; EndpointError when every attempt failed (its `attempts` says how many)."""
        body = {"model": self.model, "messages": list(messages), "response_format": response_format,
                "max_tokens": max_tokens, "temperature": temperature, "stream": False}
        ep = self.endpoint
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                data = await self._post(body)
                answer = self._read(data, attempt)
            except (EndpointError, httpx.HTTPError, TimeoutError) as exc:
                error = ep.failure(exc)
                delay = ep.settle(attempt, started, error)
                if delay is None:
                    raise error from exc
                await anyio.sleep(delay)
                continue
            ep.settle(attempt, started, None)
            return answer

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        async with self._limiter:
            if self._client is None:
                self._client = httpx.AsyncClient(timeout=self.endpoint.timeout)
            self.metrics.in_flight.inc()
            try:
                with anyio.fail_after(self.endpoint.timeout_s):
                    response = await self._client.post(self.endpoint.url, json=body, headers=self.endpoint.headers)
            finally:
                self.metrics.in_flight.dec()
        return self.endpoint.judge(response)

    def _read(self, data: dict[str, Any], attempt: int) -> ChatAnswer:
        """The answer's text and usage; tokens are counted here, for every call that reported them."""
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        self.metrics.tokens.labels(kind="prompt").inc(prompt)
        self.metrics.tokens.labels(kind="completion").inc(completion)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise EndpointError("bad_response", f"no choices[0].message.content in the answer ({exc!r})") from exc
        if not isinstance(content, str):
            raise EndpointError("bad_response", f"choices[0].message.content is {type(content).__name__}, not text")
        return ChatAnswer(content, prompt, completion, choice.get("finish_reason"), attempt)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
