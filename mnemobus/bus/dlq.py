"""Inspect, replay and purge dead letters in the MEMORY_DLQ stream.

Replay republishes the original message to its original subject without the
`Nats-Msg-Id` header: the duplicate window would otherwise drop it, and the
store's idempotency by episode id already makes a replay safe.
"""

from __future__ import annotations

from dataclasses import dataclass


from mnemobus import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.errors import NotFound
from mnemobus.envelope import DeadLetter


@dataclass(frozen=True)
class StoredLetter:
    seq: int
    subject: str
    letter: DeadLetter


async def list_letters(bus: Bus, group: str | None = None, limit: int = 1000) -> list[StoredLetter]:
    try:
        info = await bus.js.stream_info(subjects.DLQ_STREAM)
    except NotFound:
        return []
    out: list[StoredLetter] = []
    want = subjects.dlq(group) if group else None
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        if len(out) >= limit or info.state.messages == 0:
            break
        try:
            raw = await bus.js.get_msg(subjects.DLQ_STREAM, seq)
        except NotFound:
            continue
        if want and raw.subject != want:
            continue
        out.append(StoredLetter(seq, raw.subject, DeadLetter.model_validate_json(raw.data or b"{}")))
    return out


async def replay(bus: Bus, group: str | None = None) -> tuple[int, int]:
    """Republish every letter that kept its whole message; returns (replayed, skipped)."""
    replayed = skipped = 0
    for item in await list_letters(bus, group, limit=1_000_000):
        if item.letter.truncated:
            skipped += 1
            continue
        data = item.letter.data.encode("utf-8")
        if item.letter.original_subject.startswith(subjects.EPISODE_PREFIX + "."):
            await bus.js_publish(item.letter.original_subject, data)
        else:
            await bus.publish(item.letter.original_subject, data)
        await bus.js.delete_msg(subjects.DLQ_STREAM, item.seq)
        replayed += 1
    return replayed, skipped


async def purge(bus: Bus, group: str | None = None) -> int:
    try:
        info = await bus.js.stream_info(subjects.DLQ_STREAM)
    except NotFound:
        return 0
    before = info.state.messages
    if group:
        await bus.js.purge_stream(subjects.DLQ_STREAM, subject=subjects.dlq(group))
    else:
        await bus.js.purge_stream(subjects.DLQ_STREAM)
    after = (await bus.js.stream_info(subjects.DLQ_STREAM)).state.messages
    return before - after
