"""A scripted OpenAI-compatible HTTP server on a real loopback socket, for the failure classes a real model
server cannot be made to show on demand: 429 with Retry-After, 500, bad JSON, schema-invalid answers, hangs.

Each request takes the next planned reply from the queue (the last plan repeats
once the queue is down to one); every request is recorded with its body and headers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0  # wait this long before answering (or until the server stops)


def chat(content: str, prompt_tokens: int = 40, completion_tokens: int = 12) -> Reply:
    body = {"id": "x", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}
    return Reply(body=json.dumps(body).encode())


def answer(entities: list[dict[str, Any]] | None = None, facts: list[dict[str, Any]] | None = None, **usage: int) -> Reply:
    return chat(json.dumps({"entities": entities or [], "facts": facts or []}), **usage)


def embeddings(vectors: list[list[float]]) -> Reply:
    body = {"object": "list", "model": "fake", "usage": {"prompt_tokens": 3, "total_tokens": 3},
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]}
    return Reply(body=json.dumps(body).encode())


def status(code: int, text: str = "", headers: dict[str, str] | None = None) -> Reply:
    return Reply(code, json.dumps({"error": {"message": text or f"status {code}"}}).encode(), headers or {})


def hang(seconds: float) -> Reply:
    return Reply(hang_s=seconds, body=b"{}")


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float  # time.monotonic() when it arrived


class FakeOpenAI:
    def __init__(self) -> None:
        self.plan: list[Reply] = []
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                reply = fake._next(self.path, dict(self.headers), raw)
                try:
                    if reply.hang_s and fake._stopping.wait(reply.hang_s):
                        return
                    self.send_response(reply.status)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first (its timeout)
                    pass
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def _next(self, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        with self._lock:
            self.seen.append(Seen(path, headers, json.loads(raw or b"{}"), time.monotonic()))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if not self.plan:
                return status(500, "nothing planned")
            return self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]

    def will(self, *replies: Reply) -> FakeOpenAI:
        with self._lock:
            self.plan = list(replies)
        return self

    @property
    def calls(self) -> int:
        return len(self.seen)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def fake_openai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    server.start()
    try:
        yield server
    finally:
        server.stop()
