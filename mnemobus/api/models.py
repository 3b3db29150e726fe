"""Request and response bodies, named and shaped as the Graphiti REST service names them.

The same models serve HTTP and NATS, so a client can switch transports
without changing a field. Field names are snake_case, as Graphiti's are;
additions beyond Graphiti's shape are marked in docs/api.md.
"""

from __future__ import annotations

import re
from datetime import datetime
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from mnemobus.shared.envelope import utcnow
from mnemobus.shared.groups import GROUP_ID_PATTERN, MAX_GROUP_ID_LEN, InvalidGroupId, validate_group_id
from mnemobus.shared.limits import MAX_QUERY_CHARS, Moment, StoredText, clip, lone_surrogate
from mnemobus.store.model import Entity, Episode, Fact, ScoredEpisode, ScoredFact

#: what a client-given message uuid may look like: it becomes part of an idempotency key
CLIENT_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # used with fullmatch


def _group_id(value: str) -> str:
    try:
        return validate_group_id(value)
    except InvalidGroupId as exc:
        raise ValueError(str(exc)) from exc


#: a group id as a caller sends it: refused with the group-id rules' own message, documented with their pattern
GroupIdField = Annotated[str, AfterValidator(_group_id), WithJsonSchema(
    {"type": "string", "pattern": GROUP_ID_PATTERN, "minLength": 1, "maxLength": MAX_GROUP_ID_LEN,
     "description": "letters, digits, '_' and '-' only"})]


class ErrorDetail(BaseModel):
    """Every error answer: `detail` names the problem (FastAPI's request validation gives a list of them)."""

    detail: str | list[dict[str, Any]]


#: characters of a source message shown in a search result (the whole message stays stored)
EPISODE_TEXT_CHARS = 2000


class Body(BaseModel):
    """Unknown fields are ignored, as FastAPI does for Graphiti's DTOs."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _storable_strings(cls, data: Any) -> Any:
        if (where := lone_surrogate(data)) is not None:
            raise ValueError(where)
        return data


class Message(Body):
    content: StoredText
    uuid: str | None = Field(default=None, description="idempotency key: the same uuid in the same group is stored once")
    name: str = Field(default="", max_length=256, description="the episode's name, given back as sent")
    role_type: Literal["user", "assistant", "system"]
    role: str | None = None
    timestamp: Moment = Field(default_factory=utcnow)
    source_description: str = ""

    @field_validator("uuid")
    @classmethod
    def _uuid(cls, v: str | None) -> str | None:
        if v is not None and not CLIENT_ID_RE.fullmatch(v):
            raise ValueError("uuid must be 1-128 characters of letters, digits, '_', '-', '.' or ':'")
        return v


class AddMessagesRequest(Body):
    group_id: GroupIdField
    messages: list[Message] = Field(min_length=1, max_length=1000)


class AddEntityNodeRequest(Body):
    """Graphiti's AddEntityNodeRequest: an entity named directly, without an episode."""

    uuid: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    group_id: GroupIdField
    name: str = Field(min_length=1, max_length=200)
    summary: str = Field(default="", max_length=1000)


class SearchQuery(Body):
    group_ids: list[GroupIdField] | None = Field(default=None, max_length=64, description="the groups to search; "
                                                 "left out, every group (at most 64); an empty list is refused")
    query: str = Field(max_length=MAX_QUERY_CHARS)

    @field_validator("group_ids")
    @classmethod
    def _named_or_left_out(cls, v: list[str] | None) -> list[str] | None:
        # `[]` read as "no groups given" searched every group (issue 41): a caller that meant none gets an error
        if v is not None and not v:
            raise ValueError("is empty: name at least one group, or leave group_ids out to search every group")
        return v

    @field_validator("query")
    @classmethod
    def _something_to_recall(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("is empty: say what to recall, as a question or keywords")
        return v
    max_facts: int = Field(default=10, ge=1, le=100, description="how many results: facts and source messages together")
    as_of: Moment | None = Field(default=None, description="mnemobus addition: facts valid at this time (default now)")
    include_episodes: bool = Field(default=True, description="mnemobus addition: false returns facts alone")


class GetMemoryRequest(Body):
    group_id: GroupIdField
    max_facts: int = Field(default=10, ge=1, le=100)
    center_node_uuid: str | None = None
    messages: list[Message] = Field(min_length=1, max_length=1000)
    include_episodes: bool = Field(default=True, description="mnemobus addition: false returns facts alone")


class FactResult(BaseModel):
    uuid: str
    name: str
    fact: str
    valid_at: datetime | None
    invalid_at: datetime | None
    created_at: datetime
    expired_at: datetime | None
    source_node_uuid: str
    target_node_uuid: str
    episodes: list[str]
    group_id: str
    confidence: float
    kind: Literal["fact", "episode"] = Field(default="fact", description="mnemobus addition: a fact, or a source "
                                             "message ranked beside the facts (then `fact` holds its words)")
    score: float | None = Field(default=None, description="mnemobus addition: the ranking score, best first")
    source_message_ids: list[str] = Field(default_factory=list, description="mnemobus addition: the messages it "
                                          "came from, as the publisher named them")
    qualifier: str | None = Field(default=None, description="mnemobus addition: what the value holds for "
                                  "(takes_medication ramipril for \"hypertension\"); null when none was said")

    @classmethod
    def of(cls, f: Fact, score: float | None = None) -> "FactResult":
        return cls(uuid=f.id, name=f.relation, fact=f.fact, valid_at=f.valid_at, invalid_at=f.invalid_at,
                   created_at=f.created_at, expired_at=f.expired_at, source_node_uuid=f.subject_id,
                   target_node_uuid=f.object_id, episodes=list(f.episode_ids), group_id=f.group_id,
                   confidence=f.confidence, score=score, source_message_ids=list(f.source_message_ids),
                   qualifier=f.qualifier)

    @classmethod
    def of_episode(cls, e: Episode, score: float | None = None, ended_at: datetime | None = None,
                   expired_at: datetime | None = None) -> "FactResult":
        """A source message in a fact's shape, so an unmodified Graphiti client shows it with the facts: valid from
        when it was said until every fact drawn from it has ended."""
        return cls(uuid=e.id, name="EPISODE", fact=clip(e.content, EPISODE_TEXT_CHARS), valid_at=e.reference_time,
                   invalid_at=ended_at, created_at=e.created_at or e.reference_time, expired_at=expired_at,
                   source_node_uuid=e.id, target_node_uuid=e.id, episodes=[e.id], group_id=e.group_id,
                   confidence=1.0, kind="episode", score=score, source_message_ids=[e.source_message_id])

    @classmethod
    def of_edge(cls, found: Fact | ScoredFact | ScoredEpisode) -> "FactResult":
        """/entity-edge/{uuid}: a fact, or a message a search returned (every uuid a search returns is fetchable)."""
        if isinstance(found, Fact):
            return cls.of(found)
        return cls.ranked([found])[0]

    @classmethod
    def ranked(cls, items: Sequence[ScoredFact | ScoredEpisode]) -> list["FactResult"]:
        return [cls.of(i.fact, i.score) if isinstance(i, ScoredFact) else
                cls.of_episode(i.episode, i.score, i.ended_at, i.expired_at) for i in items]


class SearchResults(BaseModel):
    facts: list[FactResult]


class GetMemoryResponse(BaseModel):
    facts: list[FactResult]


class Result(BaseModel):
    message: str
    success: bool


class DeleteResult(Result):
    episodes: int = 0
    entities: int = 0
    facts: int = 0


class AcceptedResult(Result):
    episode_uuids: list[str]


class EpisodeResult(BaseModel):
    """Graphiti's EpisodicNode fields, plus the role and the message id the episode came from."""

    uuid: str
    name: str
    group_id: str
    labels: list[str]
    created_at: datetime
    source: str
    source_description: str
    content: str
    valid_at: datetime
    entity_edges: list[str]
    role: str
    source_message_id: str

    @classmethod
    def of(cls, e: Episode) -> "EpisodeResult":
        return cls(uuid=e.id, name=e.source_message_id if e.name is None else e.name, group_id=e.group_id,
                   labels=["Episodic"], created_at=e.created_at or e.reference_time, source="message",
                   source_description=e.platform or "", content=graphiti_body(e), valid_at=e.reference_time,
                   entity_edges=[], role=e.role, source_message_id=e.source_message_id)


def graphiti_body(e: Episode) -> str:
    """The body Graphiti's server stores for a message, `{role}({role_type}): {content}`, so a Graphiti client
    reads back what it would from Graphiti; an exchange from the bus is not a Graphiti message and stays as sent."""
    if e.role == "exchange":
        return e.content
    return f"{e.speaker or ''}({e.role}): {e.content}"


class HealthResult(BaseModel):
    status: Literal["healthy", "unhealthy"]
    store: str = "ok"


class EntityResult(BaseModel):
    uuid: str
    name: str
    group_id: str
    labels: list[str]
    summary: str
    aliases: list[str]
    confidence: float
    created_at: datetime | None
    last_seen: datetime | None
    attributes: dict[str, Any] = Field(default_factory=dict, description="Graphiti's EntityNode attributes: "
                                       "the entity's type and the other names it is known by")

    @classmethod
    def of(cls, e: Entity) -> "EntityResult":
        return cls(uuid=e.id, name=e.name, group_id=e.group_id, labels=["Entity", e.type], summary=e.summary,
                   aliases=list(e.aliases), confidence=e.confidence, created_at=e.first_seen, last_seen=e.last_seen,
                   attributes={"type": e.type, "aliases": list(e.aliases)})


# -- NATS-only requests ------------------------------------------------------------------------

class EpisodesRequest(Body):
    group_id: GroupIdField
    last_n: int = Field(default=10, ge=1, le=1000)


class ByIdRequest(Body):
    uuid: str = Field(min_length=1, max_length=256)


class EntityByIdRequest(ByIdRequest):
    group_id: GroupIdField


class DeleteGroupRequest(Body):
    group_id: GroupIdField


class EntitySearchRequest(Body):
    group_id: GroupIdField
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    limit: int = Field(default=10, ge=1, le=100)


class TraverseRequest(Body):
    group_id: GroupIdField
    entity: str = Field(min_length=1, max_length=512)
    relations: list[str] | None = None
    max_hops: int = Field(default=2, ge=1, le=6)
    limit: int = Field(default=20, ge=1, le=500)
    as_of: Moment | None = None


class AsOfRequest(Body):
    group_id: GroupIdField
    as_of: Moment
    limit: int = Field(default=1000, ge=1, le=10_000)


class HistoryRequest(Body):
    group_id: GroupIdField
    entity: str = Field(min_length=1, max_length=512)
    relation: str | None = None


class HopResult(BaseModel):
    hop: int
    fact: FactResult


class FactsResult(BaseModel):
    facts: list[FactResult]
    retention_cutoff: datetime | None = Field(default=None, description="facts that ended before this were "
                                              "evicted from the group (retention); null: its past is complete")
    note: str | None = Field(default=None, description="set when the answer reaches before the cutoff: it may "
                             "lack facts that held then")


class HopsResult(BaseModel):
    hops: list[HopResult]


class EntitiesResult(BaseModel):
    entities: list[EntityResult]


class EpisodesResult(BaseModel):
    episodes: list[EpisodeResult]


class DeleteUserRequest(Body):
    user_id: str = Field(min_length=1, max_length=64)
    actor: str | None = Field(default=None, min_length=1, max_length=64, description="the canonical id of the "
                              "admin asking: with a key of api.keys it is the key's owner (naming anyone else is "
                              "refused); without, believed only from the operator role of an enforcing bus")


class StatusResult(BaseModel):
    available: bool
    document: dict[str, Any] | None
