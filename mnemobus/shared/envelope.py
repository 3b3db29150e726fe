"""Versioned wire models.

Every model keeps unknown fields (``extra="allow"``) so a newer publisher's
additions survive a hop through an older mnemobus. Field names on the wire
are camelCase, as the bus's other citizens write them.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from mnemobus.shared.limits import MAX_CONTENT_CHARS, Moment, StoredText, clip_bytes
from mnemobus.shared.subjects import check_reply_subject

ENVELOPE_VERSION = 1


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_id() -> str:
    return uuid.uuid4().hex


class WireModel(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        alias_generator=to_camel,
        str_max_length=1_000_000,
    )

    def to_wire(self) -> bytes:
        return self.model_dump_json(by_alias=True, exclude_none=True).encode()


class Source(WireModel):
    platform: str = Field(default="bus", min_length=1, max_length=64, alias="interface")
    user_id: str | None = Field(default=None, max_length=256)
    channel_id: str | None = Field(default=None, max_length=256)


class Meta(WireModel):
    agent_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    skill_hint: str | None = None
    system_actor: str | None = Field(default=None, max_length=128)


class Payload(WireModel):
    skill: str | None = None
    content: str = Field(max_length=MAX_CONTENT_CHARS)
    meta: Meta


class Reply(WireModel):
    topic: Annotated[str, AfterValidator(check_reply_subject)] | None = None


class SkillRequest(WireModel):
    """What a publisher puts on ``agent.skill.request``."""

    v: int = ENVELOPE_VERSION
    id: str = Field(default_factory=new_id, min_length=1, max_length=128)
    correlation_id: str | None = Field(default=None, max_length=128)
    parent_id: str | None = None
    timestamp: Moment = Field(default_factory=utcnow)
    source: Source = Field(default_factory=Source)
    payload: Payload
    reply: Reply | None = None

    @property
    def trace_id(self) -> str:
        return self.correlation_id or self.id


class MemoryContext(WireModel):
    """What recall added, so an executor can tell memory from the user's words."""

    groups: list[str] = Field(default_factory=list)
    block: str = ""
    facts: int = 0
    episodes: int = 0
    status: Literal["enriched", "empty", "skipped", "timeout", "error", "disabled", "circuit_open", "overloaded"] = "skipped"
    latency_ms: float = 0.0


class EnrichedRequest(SkillRequest):
    """What the plugin sends to ``agent.skill.execute.<agentId>``."""

    memory: MemoryContext = Field(default_factory=MemoryContext)
    original_content: str = ""


class SkillResponse(WireModel):
    v: int = ENVELOPE_VERSION
    id: str = Field(default_factory=new_id)
    correlation_id: str
    request_id: str
    agent_id: str
    content: str | None = None
    error: str | None = None
    timestamp: Moment = Field(default_factory=utcnow)
    memory: MemoryContext | None = None


class ErrorReply(WireModel):
    """The answer to a message that could not be handled; ``reason`` names the problem."""

    v: int = ENVELOPE_VERSION
    error: str
    reason: str
    subject: str
    request_id: str | None = None


class EpisodeMessage(WireModel):
    """One exchange for one group, as it travels to the extraction worker."""

    v: int = ENVELOPE_VERSION
    episode_id: str = Field(min_length=1, max_length=128)
    group_id: str
    role: Literal["user", "assistant", "system", "exchange"] = "exchange"
    # who said the content: the user's name for an exchange, Graphiti's `role` for an API message; older
    # publishers send none and first person is then the role's ("User")
    speaker_name: str | None = Field(default=None, max_length=256)
    # the publisher's own name for the episode (Graphiti's message `name`), shown back as it was given
    episode_name: str | None = Field(default=None, max_length=256)
    content: StoredText
    response: str | None = Field(default=None, max_length=MAX_CONTENT_CHARS)
    source_message_id: str = Field(min_length=1, max_length=256)
    correlation_id: str | None = None
    agent_id: str | None = None
    platform: str | None = None
    channel_id: str | None = None
    user_id: str | None = None
    reference_time: Moment = Field(default_factory=utcnow)

    def wire_within(self, max_bytes: int) -> tuple[EpisodeMessage, bytes]:
        """This episode cut (the answer first, then the message, each marked) until its wire form has at most
        `max_bytes` bytes, and that wire form (the sender publishes it instead of encoding again): a limit in
        characters lets 64,000 four-byte characters through at 256,000 bytes, and the worker refuses an episode
        over the bus's message limit."""
        episode, wire = self, self.to_wire()
        for _ in range(4):  # a cut removes at least the bytes over; JSON escapes can leave a few more
            over = len(wire) - max_bytes
            if over <= 0:
                break
            sizes = {f: len((getattr(episode, f) or "").encode("utf-8", "surrogatepass")) for f in ("response", "content")}
            field = "response" if sizes["response"] >= min(sizes["content"], over + 64) else "content"
            cut = clip_bytes(getattr(episode, field) or "", max(0, sizes[field] - over - 64))
            episode = episode.model_copy(update={field: cut})
            wire = episode.to_wire()
        return episode, wire


class DeadLetter(WireModel):
    v: int = ENVELOPE_VERSION
    reason: str
    error: str
    original_subject: str
    attempts: int = 1
    group_id: str
    headers: dict[str, str] = Field(default_factory=dict)
    data: str = Field(description="the original message, utf-8 with replacement, capped")
    data_bytes: int = 0
    truncated: bool = False
    at: datetime = Field(default_factory=utcnow)
    extra_info: dict[str, Any] = Field(default_factory=dict)
