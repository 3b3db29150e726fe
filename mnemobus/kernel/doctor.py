"""`mnemobus doctor`: say what works and what does not, in the order a newcomer would check."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone

from urllib.parse import urlsplit

import anyio

from mnemobus.bus.connection import Bus
from mnemobus.bus.dlq import count_letters
from mnemobus.kernel.peers import worker_beats
from mnemobus.shared.config import Settings
from mnemobus.shared.redact import mask_urls
from mnemobus.store.contract import ChecksIntegrity, Damage

CONNECT_S = 30  # NATS and the store open within this, or doctor says they did not answer
MENDABLE = "it is derived from rows the store keeps and is rebuilt from them, nothing lost: `mnemobus doctor --repair`"
NOT_MENDABLE = ("SQLite cannot mend the file in place: stop what uses it, keep a copy of it, and restore a backup "
                "or export what still reads (`mnemobus graph export <group>`)")


async def _unreachable(url: str, timeout_s: float) -> str | None:
    """Why no server of a configured NATS URL answers, or None when one does. The client itself retries a refused
    first connect until its deadline (30 s of silence, then a bare TimeoutError): a newcomer with a wrong port
    should hear so at once, and what was refused."""
    from mnemobus.kernel.app import tcp_refusal

    errors = []
    for one in url.split(","):
        parts = urlsplit(one.strip() if "://" in one else f"nats://{one.strip()}")
        host, port = parts.hostname or "127.0.0.1", parts.port or 4222
        why = await anyio.to_thread.run_sync(tcp_refusal, host, port, timeout_s)
        if why is None:
            return None
        errors.append(f"{host}:{port}: {why}")
    return "; ".join(errors)


async def doctor(settings: Settings, *, smoke: bool, say: Callable[[str], None], repair: bool = False) -> int:
    from mnemobus.kernel.app import open_runtime

    failures = 0
    say("config: ok")
    if settings.nats.url and (why := await _unreachable(settings.nats.url, max(settings.nats.connect_timeout_s, 0.5))):
        say(f"nats: FAILED: no server answers at {mask_urls(settings.nats.url)} ({why}); "
            "is nats-server running there, and is nats.url (MNEMOBUS_NATS__URL) right?")
        say("doctor: 1 check(s) failed")
        return 1
    try:
        with anyio.fail_after(CONNECT_S) as deadline:
            async with open_runtime(settings, need_engine=True) as rt:
                info = await rt.bus.js.account_info()
                say(f"nats: ok ({'embedded server ' if rt.server else ''}{rt.url}, JetStream streams: {info.streams})")
                try:
                    await rt.engine.store.ping()
                    say(f"store: ok ({settings.store.backend}, {await rt.engine.store.count_episodes()} episode(s))")
                except Exception as exc:
                    failures += 1
                    say(f"store: FAILED: {exc}")
                say(f"identity: ok ({len(rt.identity.users)} user(s) in {settings.identity.users_file})")
                await _bus_state(rt.bus, say)
                if not failures:
                    deadline.deadline = math.inf  # reading every page takes as long as the store is large
                    failures += await _integrity(rt.engine.store, repair=repair, say=say)
                if smoke and not failures:
                    failures += await _smoke(rt, say)
    except Exception as exc:
        failures += 1
        say(f"nats/store: FAILED: {type(exc).__name__}: {exc or f'no answer within {CONNECT_S} s'}")
    say("doctor: all checks passed" if not failures else f"doctor: {failures} check(s) failed")
    return 0 if not failures else 1


async def _bus_state(bus: Bus, say: Callable[[str], None]) -> None:
    """Who stores the episodes and what waits for an operator. Said, never failed: a doctor run on its own bus has
    no worker, and a dead letter is kept work, not a fault of this configuration."""
    try:
        live = [b for b in await worker_beats(bus) if b.fresh]
        say(f"workers: {len(live)} beating, writing {', '.join(sorted({b.store for b in live}))}" if live else
            "workers: none beating on this bus; episodes wait in its stream until `mnemobus run` (or `mnemobus run "
            "--role worker`) runs")
    except Exception as exc:  # noqa: BLE001 - the heartbeats are information here, not a check
        say(f"workers: unknown: {exc}")
    letters = await count_letters(bus)
    say("dead letters: none" if not letters else f"dead letters: {letters} waiting: `mnemobus dlq list` says why "
        "each was set aside; `mnemobus dlq replay` stores them once that is mended")


async def _integrity(store: object, *, repair: bool, say: Callable[[str], None]) -> int:
    """Damage in the store's files, each part named with what mends it; with `repair`, the parts a rebuild mends
    are rebuilt and everything is checked again. The number of damaged parts left."""
    if not isinstance(store, ChecksIntegrity):
        say("store integrity: not checked by doctor (Neo4j checks its own: `neo4j-admin database check`)")
        return 0
    started = time.perf_counter()
    found = await store.damage()
    _say_damage(found, time.perf_counter() - started, say)
    mendable = [d.part for d in found if d.repairable]
    if not (repair and mendable):
        return len(found)
    started = time.perf_counter()
    await store.repair(mendable)
    say(f"repair: rebuilt {', '.join(mendable)} from the rows indexed in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    left = await store.damage()
    _say_damage(left, time.perf_counter() - started, say)
    return len(left)


def _say_damage(found: list[Damage], seconds: float, say: Callable[[str], None]) -> None:
    if not found:
        say(f"store integrity: ok (the file's pages and its full-text indexes, read in {seconds:.1f} s)")
    for d in found:
        say(f"store integrity: FAILED: {d.part}: {d.detail}; {MENDABLE if d.repairable else NOT_MENDABLE}")


async def _smoke(rt, say: Callable[[str], None]) -> int:  # type: ignore[no-untyped-def]
    from mnemobus.shared.groups import GroupId
    from mnemobus.store.model import Episode, RecallQuery

    group = GroupId(f"doctor-smoke-{uuid.uuid4().hex[:12]}")
    episode = Episode(id=uuid.uuid4().hex, group_id=group, content="Doctor smoke test: the sky is green today.",
                      role="exchange", source_message_id="doctor", reference_time=datetime.now(timezone.utc))
    try:
        await rt.engine.ingest(episode)
        back = await rt.engine.store.get_episode(group, episode.id)
        found = await rt.engine.recall(RecallQuery(text="sky green", group_ids=(group,)))
        if back is None or found.empty:
            say(f"smoke: FAILED: wrote to {group} but could not read it back")
            return 1
        say(f"smoke: ok (wrote, read back and recalled from {group})")
        return 0
    finally:
        counts = await rt.engine.store.delete_group(group)
        say(f"smoke: deleted {group} ({counts.episodes} episode(s))")
