"""Wraps every handler: size check, JSON and schema validation, metrics, errors.

The kernel measures, handlers don't. A message that cannot be handled gets an
error reply when it has a reply subject and always a dead letter with its
reason; the endpoint keeps serving whatever one message did.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from nats.aio.msg import Msg
from pydantic import BaseModel, ValidationError

from mnemobus.bus.connection import Bus
from mnemobus.bus.deadletter import DeadLetterPublisher
from mnemobus.bus.permissions import forged_reply
from mnemobus.bus.router import Route
from mnemobus.shared.envelope import ErrorReply
from mnemobus.shared.errors import InvalidMessage
from mnemobus.shared.limiters import acquire_at_once
from mnemobus.shared.limits import lone_surrogate
from mnemobus.shared.metrics import PipelineMetrics

log = logging.getLogger("mnemobus.endpoint")


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem: the field path and what is wrong with it."""
    parts = []
    for err in exc.errors()[:10]:
        loc = ".".join(str(p) for p in err["loc"]) or "(message)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def parse_message(model: type[BaseModel], data: bytes, max_bytes: int) -> BaseModel:
    """Bytes to a validated model, or InvalidMessage naming the problem.

    pydantic's own JSON parser first: 5-7 µs a request against 12-18 for `json.loads`, the surrogate walk and
    validation (issue 36, docs/performance.md). It refuses everything the careful path below refuses (lone
    surrogates, integers Python will not convert, bytes that are not UTF-8; tests/pipeline/test_parse_paths.py
    holds the two to the same answers), and more (a byte-order mark, UTF-16, deep nesting), so a message it
    refuses goes through the careful path, which either accepts it as before or says why not in our words.
    """
    if len(data) > max_bytes:
        raise InvalidMessage("payload_too_large", f"message is {len(data)} bytes; the limit is {max_bytes}")
    try:
        return model.model_validate_json(data)
    except (ValueError, RecursionError):  # ValidationError is a ValueError
        return reported_parse(model, data)


def reported_parse(model: type[BaseModel], data: bytes) -> BaseModel:
    """The careful parse: each step its own error, so a refused message is told which problem it has."""
    try:
        raw = json.loads(data)
    except UnicodeDecodeError as exc:
        raise InvalidMessage("malformed_json", f"message is not UTF-8: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InvalidMessage("malformed_json", f"message is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise InvalidMessage("malformed_json", "message nests JSON arrays or objects too deeply to parse") from exc
    except ValueError as exc:  # e.g. an integer longer than Python converts (sys.get_int_max_str_digits)
        raise InvalidMessage("malformed_json", f"message holds a value that cannot be parsed: {exc}") from exc
    if not isinstance(raw, dict):
        raise InvalidMessage("schema_error", f"message must be a JSON object, got {type(raw).__name__}")
    if (where := lone_surrogate(raw)) is not None:
        raise InvalidMessage("invalid_unicode", where)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        kinds = {e["type"] for e in exc.errors()}
        reason = "missing_field" if kinds == {"missing"} else "schema_error"
        raise InvalidMessage(reason, describe_validation_error(exc)) from exc
    except RecursionError as exc:
        raise InvalidMessage("schema_error", "message nests values too deeply to validate") from exc


@dataclass
class MessageContext:
    """What a handler may know about the message beyond its model."""

    subject: str
    reply: str | None
    headers: dict[str, str]
    data: bytes
    bus: Bus
    group_id: str | None = None  # set by the handler once known, so a dead letter lands in the right group
    # how long the message waited in this process for its handler to start: a process behind its load shows it
    # here first (its event loop busy with the requests ahead), before any ticker wakes to say so
    queued_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class Endpoint:
    """One route's subscription and the workers that run its handler, at most `route.max_inflight` at once.

    A worker handles one message after another, so a context variable a handler sets is still set for the next
    message that worker takes: a handler that sets one resets it (`var.reset(token)`) before it returns."""

    def __init__(self, route: Route, bus: Bus, metrics: PipelineMetrics, dlq: DeadLetterPublisher,
                 tg: TaskGroup, *, max_bytes: int) -> None:
        self.route = route
        self.bus = bus
        self.metrics = metrics
        self.dlq = dlq
        self.tg = tg
        self.max_bytes = max_bytes
        self.limiter = anyio.CapacityLimiter(route.max_inflight)
        # this endpoint's series, looked up once rather than per message
        self._handler_seconds = metrics.handler_seconds.labels(endpoint=route.name)
        self._queued_seconds = metrics.queued_seconds.labels(endpoint=route.name)
        self._outcomes: dict[str, Any] = {}  # outcome -> its series, each looked up the first time it happens
        self._sub: Any = None
        self._inflight = 0
        self._drained: anyio.Event | None = None  # made by drain() only: an event a message cost ~0.1 ms cold
        # the handlers' workers: a message goes to one waiting for work; a new one is started only when none is.
        # Why not a task a message: anyio's start_soon (and an Event to say idle) cost 0.15-0.2 ms of CPU a
        # message in a process woken for it, ~10% of the plugin's relay (docs/performance.md, after stop 54).
        # An asyncio queue, not an anyio stream: the bus runs on asyncio (nats-py), and the stream's receive
        # costs as much as the spawn it replaces
        self._work: asyncio.Queue[tuple[Msg, object, float] | None] = asyncio.Queue()
        self._workers = 0
        self._waiting = 0  # workers blocked on the queue; those beyond the messages queued are free
        self.last_error: str | None = None

    @property
    def workers(self) -> int:
        """The worker tasks this endpoint keeps: the most messages it had in flight at once; none once drained."""
        return self._workers

    async def start(self) -> None:
        self._sub = await self.bus.subscribe(self.route.subject, self._on_message, queue=self.route.queue)

    async def _on_message(self, msg: Msg) -> None:
        arrived = time.perf_counter()
        token = object()
        # a free slot at once: the subscription hands over every message it holds, so a backlog waits where its
        # wait is measured (`MessageContext.queued_s`); past the limit the wait is here, not in the task, which
        # leaves excess messages queued in the subscription: backpressure
        await acquire_at_once(self.limiter, token)
        self._inflight += 1
        if self._waiting > self._work.qsize():  # a worker is free: it takes this message
            self._work.put_nowait((msg, token, arrived))
        else:  # every worker is busy (or there is none yet): one more, kept for the messages after this one
            self._workers += 1
            self.tg.start_soon(self._worker, (msg, token, arrived))

    async def _worker(self, job: tuple[Msg, object, float] | None) -> None:
        """Handles one message after another until drain() says stop (None)."""
        try:
            while job is not None:
                await self._run(*job)
                self._waiting += 1
                try:
                    job = await self._work.get()
                finally:
                    self._waiting -= 1
        finally:
            self._workers -= 1
            if self._workers == 0:  # cancelled: what no worker will take frees its slot, or drain would wait for it
                self._abandon_queued()

    def _abandon_queued(self) -> None:
        while not self._work.empty():
            if (job := self._work.get_nowait()) is None:
                continue
            msg, token, _ = job
            self._abandoned(msg, "before handling")
            self._finished(token)

    def _abandoned(self, msg: Msg, when: str) -> None:
        """A message the endpoint was cancelled (stopped without draining) before finishing: logged and counted."""
        log.warning("endpoint %s stopped %s a message from %s", self.route.name, when, msg.subject)
        self._count("abandoned")

    def _count(self, outcome: str) -> None:
        if (counted := self._outcomes.get(outcome)) is None:
            counted = self._outcomes[outcome] = self.metrics.messages.labels(endpoint=self.route.name, outcome=outcome)
        counted.inc()

    def _finished(self, token: object) -> None:
        """A message is done with (handled or abandoned): its slot is free, and a waiting drain hears of the last."""
        self._inflight -= 1
        if self._inflight == 0 and self._drained is not None:
            self._drained.set()
        self.limiter.release_on_behalf_of(token)

    async def _run(self, msg: Msg, token: object, arrived: float) -> None:
        started = time.perf_counter()
        ctx = MessageContext(msg.subject, msg.reply or None, dict(msg.headers or {}), msg.data, self.bus,
                             queued_s=started - arrived)
        self._queued_seconds.observe(ctx.queued_s)
        outcome = "abandoned"  # until the handler has returned: cancelled (the runner stopped without draining)
        try:
            rejection = await self._handled(msg, ctx)
            outcome = "ok" if rejection is None else ("error" if rejection[0] == "handler_error" else "invalid")
            # counted before the error reply goes out, so whoever reads the reply sees the count
            self._count(outcome)
            self._handler_seconds.observe(time.perf_counter() - started)
            if rejection is not None:
                await self._reject(ctx, *rejection)
        finally:
            if outcome == "abandoned":  # its slot is freed all the same, or a later drain would wait for it
                self._abandoned(msg, "while handling")
            self._finished(token)

    async def _handled(self, msg: Msg, ctx: MessageContext) -> tuple[str, str] | None:
        """Runs the handler and sends its reply; why the message was rejected, or None."""
        try:
            if ctx.reply and (role := forged_reply(msg.subject, ctx.reply)) is not None:
                ctx.reply = None  # never answered: the reply would land in the inbox of a role that did not ask
                raise InvalidMessage("forged_reply", f"the reply subject is the {role} role's inbox, and that role "
                                                     f"cannot send {msg.subject}")
            parsed = parse_message(self.route.model, msg.data, self.max_bytes)
            result = await self.route.handler(parsed, ctx)
            if result is not None and ctx.reply:
                await self.bus.publish(ctx.reply, result.model_dump_json(by_alias=True, exclude_none=True).encode())
        except InvalidMessage as exc:
            return exc.reason, exc.detail
        except Exception as exc:  # one bad message must never stop the endpoint
            log.exception("handler %s failed on a message from %s", self.route.name, msg.subject)
            return "handler_error", f"{type(exc).__name__}: {exc}"
        return None

    async def _reject(self, ctx: MessageContext, reason: str, detail: str) -> None:
        self.last_error = f"{reason}: {detail}"
        log.warning("rejected message on %s: %s: %s", ctx.subject, reason, detail[:300])
        if ctx.reply:
            try:
                reply = ErrorReply(error=f"{reason}: {detail}", reason=reason, subject=ctx.subject)
                await self.bus.publish(ctx.reply, reply.to_wire())
            except Exception as exc:  # noqa: BLE001 - the dead letter below still keeps the message
                self.metrics.reply_errors.inc()
                log.warning("could not send the error reply for a message from %s: %s", ctx.subject, exc)
        try:
            await self.dlq.send(reason=reason, error=detail, original_subject=ctx.subject, data=ctx.data,
                                headers=ctx.headers, group_id=ctx.group_id)
        except Exception:  # counted by the dead-letter queue (mnemobus_dead_letter_errors_total)
            log.exception("could not dead-letter the rejected message from %s: it is lost", ctx.subject)

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Stop taking messages, then wait for the ones in flight."""
        if self._sub is not None:
            try:
                await self._sub.drain()
            except Exception as exc:
                log.warning("unsubscribe of %s failed: %s", self.route.subject, exc)
        if self._inflight:
            self._drained = anyio.Event()
            with anyio.move_on_after(timeout_s) as scope:
                await self._drained.wait()
            if scope.cancelled_caught:
                log.warning("%d handler(s) of %s still running after %ss", self._inflight, self.route.name, timeout_s)
        for _ in range(self._workers):  # each ends after the message it holds, if any: a task group can close
            self._work.put_nowait(None)
