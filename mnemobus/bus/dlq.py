"""Inspect, replay and purge dead letters in the MEMORY_DLQ stream.

Replay republishes the original message to its original subject without the
`Nats-Msg-Id` header: the duplicate window would otherwise drop it, and the
store's idempotency by episode id already makes a replay safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.errors import NotFound
from mnemobus.shared.envelope import DeadLetter


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


async def count_letters(bus: Bus, group: str | None = None) -> int:
    """How many dead letters there are (in `group`), whatever a listing's limit showed."""
    try:
        info = await bus.js.stream_info(subjects.DLQ_STREAM, subjects_filter=subjects.dlq(group) if group else None)
    except NotFound:
        return 0
    return sum((info.state.subjects or {}).values()) if group else info.state.messages


@dataclass
class ReplayReport:
    replayed: int = 0
    truncated: int = 0
    #: letters left in place because the check said they would be dead-lettered again, with its reason
    kept: list[tuple[StoredLetter, str]] = field(default_factory=list)


async def replay(bus: Bus, group: str | None = None,
                 refusal: Callable[[str, bytes], str | None] | None = None) -> ReplayReport:
    """Republish every letter that kept its whole message and that `refusal(subject, data)` does not refuse
    (it answers the reason the consumer would dead-letter it again, or None); the refused stay, named."""
    report = ReplayReport()
    for item in await list_letters(bus, group, limit=1_000_000):
        if item.letter.truncated:
            report.truncated += 1
            continue
        data = item.letter.data.encode("utf-8")
        if refusal is not None and (why := refusal(item.letter.original_subject, data)) is not None:
            report.kept.append((item, why))
            continue
        if item.letter.original_subject.startswith(subjects.EPISODE_PREFIX + "."):
            await bus.js_publish(item.letter.original_subject, data)
        else:
            await bus.publish(item.letter.original_subject, data)
        await bus.js.delete_msg(subjects.DLQ_STREAM, item.seq)
        report.replayed += 1
    return report


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
