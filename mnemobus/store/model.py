"""Memory data: episodes, entities, bi-temporal facts, recall results. No I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, TypeVar

import numpy as np

from mnemobus.shared.groups import GroupId
from mnemobus.store.lifecycle import Promoted

Vector = np.ndarray  # float32, shape (dim,), unit length
EdgeType = Literal["causal", "temporal", "semantic", "co-occurrence", "hierarchical"]


def episode_id_for(group_id: str, source_message_id: str, role: str) -> str:
    """Deterministic, so a redelivery or replay of one exchange can never make a second copy."""
    key = f"{group_id}\x1f{source_message_id}\x1f{role}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Episode:
    id: str
    group_id: GroupId
    content: str
    role: str
    source_message_id: str
    reference_time: datetime
    response: str | None = None
    agent_id: str | None = None
    platform: str | None = None
    channel_id: str | None = None
    created_at: datetime | None = None
    speaker: str | None = None  # the name of who said the content (role says which side); None when not known
    name: str | None = None  # the publisher's name for the episode (Graphiti's message `name`); None when not given


@dataclass(frozen=True, slots=True)
class Entity:
    id: str
    group_id: GroupId
    name: str
    canonical_name: str
    type: str = "thing"
    aliases: tuple[str, ...] = ()
    summary: str = ""
    confidence: float = 1.0
    first_seen: datetime | None = None
    last_seen: datetime | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    id: str
    group_id: GroupId
    subject_id: str
    object_id: str
    subject_name: str
    object_name: str
    relation: str
    edge_type: EdgeType
    fact: str
    confidence: float
    valid_at: datetime | None
    invalid_at: datetime | None
    created_at: datetime
    expired_at: datetime | None = None
    superseded_by: str | None = None
    last_seen: datetime | None = None
    episode_ids: tuple[str, ...] = ()
    source_message_ids: tuple[str, ...] = ()
    retrieval_count: int = 0
    # what the value holds for ("ramipril" for "hypertension"): a relation one value per qualifier (the
    # relation table's `per_qualifier`) ends only the old value of the same qualifier. None: said without one
    qualifier: str | None = None


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    episode_id: str
    created: bool  # False when the episode was already stored (idempotent replay)
    screened: bool = False  # True when injection markers kept it out of extraction
    entities: int = 0
    facts_added: int = 0
    facts_reinforced: int = 0
    facts_invalidated: int = 0
    facts_extracted: int = 0  # facts and endings the extractor stated (0 when screened or a replay)
    extractor: str = ""  # the extractor that read the episode ("" when none did)


@dataclass(frozen=True, slots=True)
class RecallQuery:
    text: str
    group_ids: tuple[GroupId, ...]
    as_of: datetime | None = None  # None means now
    max_facts: int = 10
    max_episodes: int = 3
    recipe: str = "hybrid"
    # the promoted memories of the groups, at most this many, read in the recall's own reads (issue 36); 0: none
    promoted: int = 0
    sessions: tuple[str | None, ...] | None = None  # the conversations whose session-scoped memories it sees
    # the one ranking's length, facts and messages together (what every door shows); None: max_facts facts and
    # max_episodes messages. Cut before whole rows are read and retrievals counted, so neither is paid for an
    # item no door shows (issue 36)
    max_items: int | None = None


@dataclass(frozen=True, slots=True)
class Said:
    """What recall ranks and de-duplicates a candidate message by, read where a whole Episode costs more.

    A recall scores ~40 messages a group (found ones and the turns around them) and shows at most
    `max_episodes`: building every one as a whole Episode (13 fields, two datetimes) was most of what reading
    them cost (issue 36, docs/performance.md). Recall builds whole rows only for the few it returns.
    """

    id: str
    group_id: GroupId
    content: str
    at_s: float  # reference time, epoch seconds
    # builds the whole Episode from what the read already fetched (SQLite: the row, same snapshot), so the few
    # returned cost no second statement; None: recall reads those by id
    whole: Callable[[], Episode] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Neighbour:
    """An episode said next to another (`anchor_id`): `offset` -1 is the one just before it, +1 just after."""

    anchor_id: str
    offset: int
    episode: Episode | Said  # a Said only when asked for (`episode_context(light=True)`)


@dataclass(frozen=True, slots=True)
class ScoredFact:
    fact: Fact
    score: float


@dataclass(frozen=True, slots=True)
class ScoredEpisode:
    episode: Episode
    score: float
    # when every fact drawn from it had ended (the latest end), and when that was recorded: a door that returns
    # the message as a fact shows it as no longer current. None while any of them holds, or none was drawn
    ended_at: datetime | None = None
    expired_at: datetime | None = None


class _Scored(Protocol):
    @property
    def score(self) -> float: ...


F = TypeVar("F", bound=_Scored)
E = TypeVar("E", bound=_Scored)


def one_ranking(facts: Sequence[F], episodes: Sequence[E], limit: int | None = None) -> list[F | E]:
    """Facts and messages in one order by score, best first; at a tie a fact comes first (the sort is stable)."""
    items: list[F | E] = [*facts, *episodes]
    items.sort(key=lambda item: -item.score)
    return items if limit is None else items[:limit]


@dataclass(frozen=True, slots=True)
class RecallResult:
    facts: tuple[ScoredFact, ...] = ()
    episodes: tuple[ScoredEpisode, ...] = ()
    groups: tuple[GroupId, ...] = field(default=())
    promoted: tuple[Promoted, ...] = ()  # newest first, when the query asked for them

    @property
    def empty(self) -> bool:
        return not self.facts and not self.episodes

    def ranked(self, limit: int | None = None) -> tuple[ScoredFact | ScoredEpisode, ...]:
        """Facts and source messages in one order by score, best first; at a tie a fact comes first.

        Both scores are reciprocal-rank fusions normalised so that first place in every list scores 1 (a fact's
        then weighted by its confidence and age), so they compare: the one ranking every door returns."""
        return tuple(one_ranking(self.facts, self.episodes, limit))

    def top(self, limit: int) -> RecallResult:
        """The best `limit` items of the one ranking, facts and messages kept apart as before."""
        best = self.ranked(limit)
        return RecallResult(facts=tuple(i for i in best if isinstance(i, ScoredFact)),
                            episodes=tuple(i for i in best if isinstance(i, ScoredEpisode)), groups=self.groups,
                            promoted=self.promoted)


@dataclass(frozen=True, slots=True)
class GroupExport:
    """Every row of one group as stored: what a migration copies."""

    group_id: GroupId
    episodes: list[tuple[Episode, bool, Vector | None]] = field(default_factory=list)  # (episode, screened, vector)
    entities: list[tuple[Entity, Vector | None]] = field(default_factory=list)
    facts: list[tuple[Fact, Vector | None]] = field(default_factory=list)
    mentions: list[tuple[str, str]] = field(default_factory=list)  # (episode id, entity id)
