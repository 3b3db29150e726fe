"""Dead letters: a message we cannot handle is kept, with its reason, never dropped.

They go to the durable `MEMORY_DLQ` stream on `memory.dlq.<group>`, so an
operator can list, replay or purge them after the fact.
"""

from __future__ import annotations

import logging
from typing import Any

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.shared.envelope import DeadLetter
from mnemobus.shared.groups import GROUP_ID_RE
from mnemobus.shared.metrics import PipelineMetrics

log = logging.getLogger("mnemobus.dlq")

#: Room kept for the dead letter's own fields when the original is near the size limit.
_ENVELOPE_ROOM = 8 * 1024


class DeadLetterPublisher:
    def __init__(self, bus: Bus, metrics: PipelineMetrics) -> None:
        self.bus = bus
        self.metrics = metrics

    async def send(
        self,
        *,
        reason: str,
        error: str,
        original_subject: str,
        data: bytes,
        headers: dict[str, str] | None = None,
        group_id: str | None = None,
        attempts: int = 1,
        extra: dict[str, Any] | None = None,
    ) -> None:
        group = group_id if group_id and GROUP_ID_RE.fullmatch(group_id) else subjects.UNROUTED_GROUP
        cap = max(1024, min(self.bus.max_payload, self.bus.settings.max_message_bytes * 4) - _ENVELOPE_ROOM) // 4
        truncated = len(data) > cap
        letter = DeadLetter(
            reason=reason,
            error=error[:2000],
            original_subject=original_subject,
            attempts=attempts,
            group_id=group,
            headers={k: v for k, v in (headers or {}).items() if not k.startswith("Nats-")},
            data=data[:cap].decode("utf-8", "replace"),
            data_bytes=len(data),
            truncated=truncated,
            extra_info=extra or {},
        )
        try:
            await self.bus.js_publish(subjects.dlq(group), letter.to_wire(), headers={"Mnemobus-Reason": reason})
        except Exception:
            self.metrics.dead_letter_errors.labels(reason=reason).inc()  # the caller says what becomes of it
            raise
        self.metrics.dead_letters.labels(reason=reason).inc()  # counted once it is stored, not before
        log.warning("dead-lettered message from %s to group %s: %s: %s", original_subject, group, reason, error[:300])
