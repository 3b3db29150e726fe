"""Which store a process's peers write, so that a process about to read another one says so before it starts.

Each worker names its store in its heartbeat (`store`, in the `MEMORY_HEARTBEATS` bucket). A process that opens
an engine on a bus it did not start itself compares its own store with those of the workers beating now: an
MCP client that launched `mnemobus mcp` in another directory, with only `MNEMOBUS_NATS__URL` set, would
otherwise open an empty SQLite file of its own and answer every search with nothing (issue 41).

The identity is what the configuration says, resolved: `sqlite:<absolute path>`, or `neo4j:<uri> db=<database>`.
Two different SQLite paths are two different files (a refusal); two Neo4j URIs may name one server through
different host names, so there a difference is a warning, not a refusal.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.errors import KeyDeleted, KeyNotFound, NotFound
from mnemobus.shared.config import StoreSettings
from mnemobus.shared.errors import MnemobusError
from mnemobus.shared.redact import mask_urls

log = logging.getLogger("mnemobus.peers")
T = TypeVar("T")


def store_identity(store: StoreSettings) -> str:
    if store.backend == "sqlite":
        return f"sqlite:{store.sqlite_path.expanduser().resolve()}"
    return f"neo4j:{mask_urls(store.neo4j.uri)} db={store.neo4j.database or 'neo4j'}"


class DifferentStore(MnemobusError):
    """This process would read (and write) a different store than the workers on its bus write."""


#: reads of the heartbeat bucket before this process starts without comparing stores, and the pause between two
READ_ATTEMPTS = 3
READ_RETRY_S = 0.5
#: a beat fresher than this many of its worker's intervals is a live worker's
FRESH_BEATS = 3
#: a beat older than fresh but younger than this many intervals may be a stalled worker's, not a gone one's (a long
#: batch, a collector pause, a loaded machine): its next beat is waited for before this process starts on its own
STALLED_BEATS = 12
#: how many of the stalled worker's intervals that wait lasts at most
STALL_WAIT_BEATS = 2


@dataclass(frozen=True)
class Beat:
    """A worker's latest heartbeat, as far as the store check reads it."""

    instance: str
    store: str
    age_s: float
    every_s: float

    @property
    def fresh(self) -> bool:
        return self.age_s <= FRESH_BEATS * self.every_s

    @property
    def stalled(self) -> bool:
        return FRESH_BEATS * self.every_s < self.age_s <= STALLED_BEATS * self.every_s


class _Unread(Exception):
    """A heartbeat read that still failed for the bus after READ_ATTEMPTS."""


async def _read_retried(read: Callable[[], Awaitable[T]], what: str, *, gone: tuple[type[Exception], ...]) -> T | None:
    """`read()`, made again when it fails for the bus (a request timed out on a loaded machine); None when what it
    reads is not there (`gone`); `_Unread` when it still fails after READ_ATTEMPTS. A read that failed once was
    taken for "no worker", and an MCP role started on a store of its own beside a live worker."""
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            return await read()
        except gone:
            return None
        except Exception as exc:  # noqa: BLE001 - the bus is slow or away: try again, then say so
            if attempt == READ_ATTEMPTS:
                raise _Unread(f"could not read {what} ({type(exc).__name__}: {exc}) in {READ_ATTEMPTS} tries") from exc
            log.info("reading %s failed (%s: %s); trying again", what, type(exc).__name__, exc)
            await anyio.sleep(READ_RETRY_S)
    raise AssertionError("unreachable")


async def _heartbeat_keys(bus: Bus) -> tuple[Any, list[str]] | None:
    """The heartbeat bucket and its keys; None when no worker has ever beaten on this bus (no bucket, no key)."""
    async def read() -> tuple[Any, list[str]]:
        return await bus.js.key_value(subjects.HEARTBEAT_BUCKET), await bus.key_names(subjects.HEARTBEAT_BUCKET)

    found = await _read_retried(read, "the workers' heartbeats", gone=(NotFound,))
    return found if found and found[1] else None


async def worker_beats(bus: Bus) -> list[Beat]:
    """Every worker's latest heartbeat that names its store (a beat from an older build names none)."""
    out: list[Beat] = []
    found = await _heartbeat_keys(bus)
    if found is None:
        return out
    kv, keys = found
    now = datetime.now(timezone.utc)
    for key in keys:
        if not key.startswith("worker."):
            continue
        entry = await _read_retried(lambda k=key: kv.get(k), f"the heartbeat {key}",
                                    gone=(KeyNotFound, KeyDeleted))
        if entry is None:
            continue
        try:
            beat: dict[str, Any] = json.loads(entry.value or b"{}")
            age = (now - datetime.fromisoformat(beat["beat_at"])).total_seconds()
        except Exception:  # noqa: BLE001 - a beat from an older build
            continue
        if "store" in beat:
            out.append(Beat(str(beat.get("instance", key)), str(beat["store"]), age, float(beat.get("every_s", 5))))
    return out


async def live_worker_stores(bus: Bus) -> dict[str, str]:
    """instance -> store identity, for every worker whose latest heartbeat is fresh (younger than three of its
    beat intervals) and names its store."""
    return {b.instance: b.store for b in await worker_beats(bus) if b.fresh}


async def _after_stalled(bus: Bus, mine: str) -> dict[str, str]:
    """The live workers' stores, having waited (at most STALL_WAIT_BEATS of its intervals) for a stalled worker
    that writes another store to beat again: taken for gone, it would let this process start on a store of its own
    beside a worker that is only slow."""
    beats = await worker_beats(bus)
    live = {b.instance: b.store for b in beats if b.fresh}
    stalled = [b for b in beats if b.stalled and b.store != mine and b.instance not in live]
    if not stalled or any(s != mine for s in live.values()):
        return live
    every = max(b.every_s for b in stalled)
    late = stalled[0]
    log.info("worker %s writes %s and last beat %.1f s ago (every %g s); waiting up to %g s for its next beat",
             late.instance, late.store, late.age_s, late.every_s, STALL_WAIT_BEATS * every)
    with anyio.move_on_after(STALL_WAIT_BEATS * every):
        while not any(b.instance in live for b in stalled):
            await anyio.sleep(min(1.0, every / 4))
            live = await live_worker_stores(bus)
    if not any(b.instance in live for b in stalled):
        log.info("worker %s did not beat again; taken for gone", late.instance)
    return live


async def check_same_store(bus: Bus, store: StoreSettings, unread: Callable[[], None] = lambda: None) -> None:
    """Refuse (DifferentStore, one line naming both) when the workers beating on this bus write another SQLite
    file or another backend; log one warning line for a different Neo4j URI. Heartbeats the bus would not give
    after READ_ATTEMPTS: a warning, `unread()` (counted), and this process starts without comparing."""
    mine = store_identity(store)
    try:
        theirs = await _after_stalled(bus, mine)
    except _Unread as exc:
        log.warning("%s: this process starts without comparing its store with the workers'", exc)
        unread()
        return
    if not theirs:
        log.info("no worker is beating on this bus yet; this process uses store %s", mine)
        return
    other = {inst: s for inst, s in theirs.items() if s != mine}
    if not other:
        return
    inst, store_of = sorted(other.items())[0]
    line = (f"this process's store is {mine} but worker {inst} on the same bus writes {store_of}: set the same "
            f"store for both (store.sqlite_path / MNEMOBUS_STORE__SQLITE_PATH, or store.neo4j.uri)")
    if mine.startswith("neo4j:") and store_of.startswith("neo4j:"):
        log.warning("%s (if both name one Neo4j server, ignore this)", line)
        return
    raise DifferentStore(line)
