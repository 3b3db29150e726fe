"""`mnemobus import messages FILE.jsonl`: a chat log into memory, through the worker's own ingestion.

One message a line (docs/graphio.md):

    {"group": "user_josh", "speaker": "Josh", "role": "user", "time": "2025-03-01T10:00:00+00:00",
     "text": "My sister Anna lives in Paris.", "id": "discord-8812"}

Why the worker's path and not the bus: each line becomes the very `EpisodeMessage` a publisher puts on
`memory.episode.<group>`, is parsed back with the worker's `parse_message` (its size limit and reasons) and
turned into an episode by the worker's `to_episode` (group id validated), then stored by
`MemoryEngine.ingest_many`, the batch call the worker makes. So nothing the bus would refuse gets in, and
everything is extracted as a live episode is. What the bus would add is a queue between this command and a
worker, which would make the closing count a guess (queued is not stored) and an import need a running
worker; here a batch is checkpointed only once the store has committed it.

The episode id is the live path's `episode_id_for(group, id, role)`, so a line read twice (a resumed run, a
second run, a message that also arrived live with the same id and role) is stored once.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from mnemobus.shared import subjects
from mnemobus.bus.endpoint import parse_message
from mnemobus.engine import MemoryEngine
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.shared.errors import InvalidMessage
from mnemobus.graphio.progress import Counts
from mnemobus.graphio.resumable import DeadLetters, Line
from mnemobus.store.model import Episode, IngestOutcome, episode_id_for
from mnemobus.kernel.worker import to_episode

PLATFORM = "import"


class ImportedMessage(BaseModel):
    """One line of a messages file; an unknown field is refused (a misspelt `txt` must not import empty)."""

    model_config = ConfigDict(extra="forbid")

    group: str = Field(description="the group the message belongs to, e.g. user_josh")
    speaker: str | None = Field(default=None, max_length=256, description="who said it; first person is theirs")
    role: Literal["user", "assistant", "system"]
    time: AwareDatetime = Field(description="when it was said, with its UTC offset")
    text: str = Field(description="what was said")
    id: str = Field(min_length=1, max_length=256, description="the message's id in its source: the idempotency key")

    def episode(self) -> EpisodeMessage:
        """The wire episode a publisher would send for this message, unchecked: `episode_of` checks it as the
        worker does."""
        return EpisodeMessage.model_construct(episode_id=episode_id_for(self.group, self.id, self.role), group_id=self.group,
                              role=self.role, speaker_name=self.speaker, content=self.text,
                              source_message_id=self.id, reference_time=self.time, platform=PLATFORM,
                              user_id=self.speaker if self.role == "user" else None)


def episode_of(data: bytes, max_bytes: int) -> Episode:
    """A line to a stored-to-be episode by the worker's own checks; InvalidMessage names what is wrong."""
    line: ImportedMessage = parse_message(ImportedMessage, data, max_bytes)  # type: ignore[assignment]
    checked: EpisodeMessage = parse_message(EpisodeMessage, line.episode().to_wire(), max_bytes)  # type: ignore[assignment]
    return to_episode(checked, subjects.episode(line.group))


class MessagesImporter:
    """Stores each batch of lines as the worker stores a batch it fetched."""

    def __init__(self, engine: MemoryEngine, max_message_bytes: int) -> None:
        self.engine, self.max_bytes = engine, max_message_bytes

    async def __call__(self, batch: list[Line], counts: Counts, dead: DeadLetters, state: dict[str, Any]) -> None:
        ready: list[tuple[Line, Episode]] = []
        for line in batch:
            try:
                ready.append((line, episode_of(line.data, self.max_bytes)))
            except InvalidMessage as exc:
                dead.add(counts, line, exc.reason, exc.detail)
        outcomes = await self.engine.ingest_many([ep for _, ep in ready]) if ready else []
        for (line, _), outcome in zip(ready, outcomes, strict=True):
            if isinstance(outcome, IngestOutcome):
                if outcome.created:
                    counts.stored += 1
                else:
                    counts.skipped += 1
            elif isinstance(outcome, InvalidMessage):
                dead.add(counts, line, outcome.reason, outcome.detail)
            else:  # the store failed (StoreUnavailable, a full disk): stop before the checkpoint moves past it
                raise outcome


def example_line(group: str, text: str, message_id: str, when: datetime, speaker: str = "Josh") -> str:
    """One line of the documented schema (tests, the bench)."""
    return json.dumps({"group": group, "speaker": speaker, "role": "user", "time": when.isoformat(),
                       "text": text, "id": message_id}) + "\n"
