"""The only module that talks to nats-py: connect, streams, publish, request, drain.

Every network call has a timeout. With no URL configured the caller starts an
EmbeddedNatsServer and passes its URL; with a URL we reconnect forever, since
a memory layer that gives up on its bus is a dead worker nobody notices.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, KeyValueConfig, RetentionPolicy, StorageType, StreamConfig

from mnemobus.shared import subjects
from mnemobus.shared.config import NatsSettings
from mnemobus.shared.errors import MnemobusError

log = logging.getLogger("mnemobus.bus")

Handler = Callable[[Msg], Awaitable[None]]


class Bus:
    """A connected client plus its JetStream context."""

    def __init__(self, nc: Client, settings: NatsSettings) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=settings.request_timeout_s)
        self.settings = settings
        self._buckets: dict[str, Any] = {}

    @classmethod
    async def connect(cls, url: str, settings: NatsSettings, *, name: str = "mnemobus",
                      count_error: Callable[[str], None] | None = None) -> "Bus":
        """`count_error(kind)` hears of every error the server or client reports on this connection
        (`permissions_violation`, `authorization_violation`, or `other`): nats-py raises none of them to the
        caller of a publish or subscribe, so a role missing a permission would otherwise show only in the log."""
        closing = False

        def mark_closing() -> None:
            nonlocal closing
            closing = True

        async def on_error(exc: Exception) -> None:
            log.warning("nats error: %s", exc)
            if count_error is not None:
                count_error(error_kind(exc))

        async def on_disconnected() -> None:
            if not closing:
                log.warning("nats disconnected; reconnecting")

        async def on_reconnected() -> None:
            log.info("nats reconnected to %s", nc.connected_url.netloc if nc.connected_url else "?")

        nc = await nats.connect(
            [u.strip() for u in url.split(",")],  # a cluster's URL list; the client reconnects to any of them
            name=name,
            connect_timeout=settings.connect_timeout_s,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            # nats-py's default (a ping every 2 min) left a client of a frozen server stuck for minutes
            ping_interval=settings.ping_interval_s,
            max_outstanding_pings=settings.max_outstanding_pings,
            error_cb=on_error,
            disconnected_cb=on_disconnected,
            reconnected_cb=on_reconnected,
            drain_timeout=10,
            # replies to this connection come to `_INBOX_<user>.<name>.…`, the one inbox its user may read
            inbox_prefix=subjects.inbox_prefix(settings.user, name),
            user=settings.user,
            password=settings.password.get_secret_value() if settings.password else None,
        )
        bus = cls(nc, settings)
        bus._mark_closing = mark_closing
        return bus

    @property
    def max_payload(self) -> int:
        return int(self.nc.max_payload)

    async def ensure_streams(self) -> None:
        """Create or update the streams (settings `nats.streams`); safe to run from every process at every start."""
        cfg = self.settings.streams
        await self._ensure(StreamConfig(
            name=subjects.EPISODE_STREAM,
            subjects=[f"{subjects.EPISODE_PREFIX}.>"],
            retention=RetentionPolicy.WORK_QUEUE if cfg.retention == "workqueue" else RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=cfg.episode_max_age_s,
            duplicate_window=cfg.duplicate_window_s,
            discard=DiscardPolicy.OLD,
            num_replicas=cfg.replicas,
        ))
        await self._ensure(StreamConfig(
            name=subjects.DLQ_STREAM,
            subjects=[f"{subjects.DLQ_PREFIX}.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=cfg.dlq_max_age_s,
            num_replicas=cfg.replicas,
        ))

    async def _ensure(self, config: StreamConfig) -> None:
        try:
            try:
                await self.js.add_stream(config)
            except nats.js.errors.BadRequestError:
                await self.js.update_stream(config)
        except nats.js.errors.APIError as exc:
            if exc.err_code in _NOT_ENOUGH_SERVERS:
                raise StreamConfigError(
                    f"stream {config.name} with nats.streams.replicas={config.num_replicas}: the server refused "
                    f"({exc.description}); replicas above 1 need a JetStream cluster of at least that many "
                    "servers") from exc
            raise

    async def publish(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        await self.nc.publish(subject, data, headers=headers)

    async def request(self, subject: str, data: bytes, timeout_s: float, headers: dict[str, str] | None = None) -> Msg:
        return await self.nc.request(subject, data, timeout=timeout_s, headers=headers)

    async def js_publish(self, subject: str, data: bytes, *, msg_id: str | None = None,
                         headers: dict[str, str] | None = None, timeout_s: float | None = None) -> Any:
        hdrs = dict(headers or {})
        if msg_id:
            hdrs["Nats-Msg-Id"] = msg_id
        timeout = timeout_s or self.settings.request_timeout_s
        try:
            return await self.js.publish(subject, data, headers=hdrs or None, timeout=timeout)
        except nats.js.errors.NoStreamResponseError:
            # no stream takes the subject: a server that came back without its store. The streams are ours to
            # declare, so declare them again and publish once more (the message id keeps the retry harmless)
            log.warning("no stream answered a publish on %s; declaring the streams again", subject)
            await self.ensure_streams()
            return await self.js.publish(subject, data, headers=hdrs or None, timeout=timeout)

    async def js_send(self, subject: str, data: bytes, *, msg_id: str | None = None,
                      headers: dict[str, str] | None = None) -> Callable[[], Awaitable[Any]]:
        """Put a JetStream publish on the connection now; the returned function waits for the server's ack
        (within the request timeout) and raises what `js_publish` would.

        Why: whatever the caller publishes after this (an answer) leaves the connection behind this message,
        so a process killed after answering has already sent the message it answered for."""
        hdrs = dict(headers or {})
        if msg_id:
            hdrs["Nats-Msg-Id"] = msg_id
        timeout = self.settings.request_timeout_s
        # the stall limit as a timeout around the call, not nats-py's wait_stall: that one waits through
        # asyncio.wait_for, a task of its own, so every send went once round the loop and the client's flusher
        # wrote each episode to the socket alone; without it an exchange's episodes and answer leave in one write
        try:
            async with asyncio.timeout(timeout):
                future = await self.js.publish_async(subject, data, headers=hdrs or None)
        except TimeoutError as exc:
            raise nats.js.errors.TooManyStalledMsgsError from exc

        async def ack() -> Any:
            try:
                return await asyncio.wait_for(future, timeout)
            except asyncio.TimeoutError as exc:
                raise nats.errors.TimeoutError from exc

        return ack

    async def put_key(self, bucket: str, key: str, value: bytes, *, replicas: int = 1) -> None:
        """Write one key of a key-value bucket, creating the bucket (one value per key) the first time."""
        kv = self._buckets.get(bucket)
        if kv is None:
            kv = await self.js.create_key_value(KeyValueConfig(bucket=bucket, history=1, replicas=replicas))
            self._buckets[bucket] = kv
        try:
            await kv.put(key, value)
        except Exception:
            self._buckets.pop(bucket, None)  # a server that lost the bucket gets it declared again next time
            raise

    async def key_names(self, bucket: str) -> list[str]:
        """Every key of a key-value bucket that holds a value or a delete marker ([] for none); NotFound when there
        is no bucket. Read from the bucket's stream's own per-subject counts, one request: the client's `keys()`
        watches through a new consumer, whose one message can reach us after the server's answer that nothing is
        pending, and then answers that there are no keys (under a loaded test run, a worker beating every 2 s
        looked gone to the MCP role's store check)."""
        prefix = f"$KV.{bucket}."
        info = await self.js.stream_info(f"KV_{bucket}", subjects_filter=f"{prefix}>")
        return sorted(subject[len(prefix):] for subject in info.state.subjects or {})

    async def subscribe(self, subject: str, handler: Handler, *, queue: str = "") -> Any:
        return await self.nc.subscribe(subject, queue=queue, cb=handler)

    async def flush(self, timeout_s: float = 2.0) -> None:
        await self.nc.flush(timeout=timeout_s)

    async def close(self) -> None:
        if self.nc.is_closed:
            return
        getattr(self, "_mark_closing", lambda: None)()
        try:
            await self.nc.drain()
        except Exception as exc:  # drain can time out or find the server gone; closing is what matters now
            log.warning("nats drain did not finish cleanly: %s", exc)
            try:
                await self.nc.close()
            except Exception as close_exc:
                log.warning("nats close after a failed drain also failed: %s", close_exc)


# JetStream error codes for "not enough servers for the replicas asked": insufficient resources, no suitable
# peers, replicas > 1 not supported without clustering
_NOT_ENOUGH_SERVERS = frozenset({10023, 10005, 10074})


class StreamConfigError(MnemobusError):
    """The server cannot hold the streams as configured (e.g. more replicas than it has servers)."""


def error_kind(exc: Exception) -> str:
    """The label of a connection error: what an operator does about it differs (a role's permissions, its
    credentials, or the network)."""
    text = str(exc).lower()
    if "permissions violation" in text:
        return "permissions_violation"
    if "authorization violation" in text:
        return "authorization_violation"
    return "other"


def decode_json(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))
