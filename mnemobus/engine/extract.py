"""What an extractor hands the engine: typed entities, facts, endings, and who said them.

Every extractor (the offline parser, the regex rules kept as a baseline, an
LLM over an OpenAI-compatible endpoint) returns an `Extraction`, and
`engine.ingest` applies it the same way whichever produced it. First person
in a message is its speaker: a `Speaker` is a role and, when the episode
carries one, a name, so two people in one conversation never become one
"User" and an assistant's "I" never touches the user's facts.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from mnemobus.store.model import EdgeType, Episode

# the type of an entity whose kind the extractor could not tell; it matches any type when names are resolved
UNTYPED = "thing"
ENTITY_TYPES = frozenset({
    "person", "place", "organization", "pet", "product", "event", "date", "technology", "project", "concept",
    "food", "activity", "condition", "agent", UNTYPED,
})

ROLE_NAMES = {"user": "User", "assistant": "Assistant", "system": "System"}
# episode roles whose content the user said: a plugin exchange, a formation window, a Graphiti user message
USER_ROLES = frozenset({"user", "exchange", "window"})


@dataclass(frozen=True, slots=True)
class Speaker:
    """Who said a message: a role (user, assistant, system) and their name when the episode carries one."""

    role: str = "user"
    name: str | None = None

    @property
    def entity_name(self) -> str:
        """The entity first person stands for: the speaker's name, else the role's ("User", "Assistant")."""
        return self.name or ROLE_NAMES.get(self.role, ROLE_NAMES["user"])

    @property
    def entity_type(self) -> str:
        return "agent" if self.role in ("assistant", "system") else "person"


def episode_speaker(episode: Episode) -> Speaker:
    """The speaker of an episode's content, from its role and speaker name (old episodes carry no name)."""
    role = "user" if episode.role in USER_ROLES else episode.role
    name = (episode.speaker or "").strip() or None
    if name is not None and name.lower() in ROLE_NAMES:  # Graphiti clients often send role "user" as the name
        name = None
    return Speaker(role, name)


_LINE_SPEAKER = re.compile(r"^(?P<name>[A-Z][\w'.-]{0,30}(?: [A-Z][\w'.-]{0,30})?):\s+(?P<text>\S.*)$")


def speaker_lines(text: str, speaker: Speaker) -> list[tuple[Speaker, str]]:
    """The content as (speaker, line): a transcript line "Name: words" is said by Name (a user), the rest by the
    episode's speaker. Chat logs and merged windows carry such prefixes; the prefix itself is no part of the words.
    """
    out: list[tuple[Speaker, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _LINE_SPEAKER.match(line.strip())
        if m is None:
            out.append((speaker, line))
            continue
        name = m.group("name")
        said_by = speaker if speaker.name and name.lower() == speaker.name.lower() else Speaker(
            speaker.role if name.lower() in ROLE_NAMES else "user", None if name.lower() in ROLE_NAMES else name)
        out.append((said_by, m.group("text")))
    return out


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    name: str
    type: str = UNTYPED
    speaker_role: str | None = None  # set when the entity is a speaker of the episode (user, assistant, ...)
    aliases: tuple[str, ...] = ()  # other names it was given in the episode ("call me Jo", the user's login)


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    subject: str
    relation: str
    object: str
    edge_type: EdgeType
    fact: str  # the sentence shown and searched: "Anna works at Siemens"
    confidence: float = 0.8
    subject_type: str = UNTYPED
    object_type: str = UNTYPED
    replaces: str | None = None  # an earlier object of (subject, relation) this statement ends ("moved from X")
    valid_from: datetime | None = None  # when it took effect ("in 2021", "last month"); None: the message's time
    qualifier: str | None = None  # what it holds for: "ramipril" "for hypertension" (store.model.Fact)


@dataclass(frozen=True, slots=True)
class ExtractedEnding:
    """A statement that something no longer holds: "I no longer work at Lumen", "I quit smoking", "I used to live
    in Paris". Ingest ends the matching current fact at `at`; one it never held is kept as past history."""

    subject: str
    relation: str
    object: str | None  # None: whatever the relation holds now ("I moved out", "I'm not married any more")
    cause: str  # the words that ended it, shown in the ended fact's history
    fact: str = ""  # the past fact as a sentence, when it must be recorded: "Sam lived in Paris"
    subject_type: str = UNTYPED
    object_type: str = UNTYPED
    edge_type: EdgeType = "semantic"
    at: datetime | None = None  # when it stopped; None: the message's time
    relations: tuple[str, ...] = ()  # others it may end ("I left Zalando": a job, a club, a home): what is held ends


@dataclass(frozen=True, slots=True)
class Extraction:
    entities: tuple[ExtractedEntity, ...] = ()
    facts: tuple[ExtractedFact, ...] = ()
    endings: tuple[ExtractedEnding, ...] = ()
    extractor: str = ""  # which extractor made it, when one delegates (a fallback); ingest fills in its own name

    @property
    def statements(self) -> int:
        """Facts and endings: what the metrics count as learnt from one episode."""
        return len(self.facts) + len(self.endings)


@runtime_checkable
class Extractor(Protocol):
    name: str

    async def extract(self, episode: Episode) -> Extraction:
        """Entities, facts and endings stated in the episode's content; first person is its speaker."""


@runtime_checkable
class BatchExtractor(Protocol):
    """Optional: an extractor that does a batch of episodes in one go (a parser runs far faster on many texts)."""

    async def extract_many(self, episodes: Sequence[Episode]) -> list[Extraction | Exception]:
        """One extraction per episode, in order; an episode's failure is returned in its slot."""


def entities_of(facts: Sequence[ExtractedFact], endings: Sequence[ExtractedEnding] = (),
                speakers: Sequence[Speaker] = (), aliases: dict[str, tuple[str, ...]] | None = None
                ) -> tuple[ExtractedEntity, ...]:
    """Every name the facts and endings mention, once (the first type given wins); a speaker is marked as one and
    carries the names it gave itself. A speaker nothing was said about and who gave no name is left out."""
    aliases = aliases or {}
    by_name = {s.entity_name: s for s in speakers}
    found: dict[str, ExtractedEntity] = {}

    def add(name: str | None, type_: str) -> None:
        if not name or name.lower() in found:
            return
        s = by_name.get(name)
        found[name.lower()] = (ExtractedEntity(name, type_) if s is None else
                               ExtractedEntity(name, s.entity_type, s.role, aliases.get(name, ())))

    for s in speakers:
        if aliases.get(s.entity_name):
            add(s.entity_name, s.entity_type)
    for f in facts:
        add(f.subject, f.subject_type)
        add(f.object, f.object_type)
        add(f.replaces, f.object_type)
    for e in endings:
        add(e.subject, e.subject_type)
        add(e.object, e.object_type)
    return tuple(found.values())


@runtime_checkable
class LosesWork(Protocol):
    """Optional: an extractor that can lose work it was given (a parse child that died or hung: its chunks fail
    and are redelivered); each of `on_failure` is called once per loss (the process's metrics: open_runtime)."""

    on_failure: list[Callable[[], None]]


#: told each chunk's positions (into the episodes given) and their extractions, in order, as each is ready
ChunkReady = Callable[[list[int], list[Extraction | Exception]], Awaitable[None]]


@runtime_checkable
class ChunkedExtractor(Protocol):
    """Optional: an extractor that hands a batch back in chunks of whole groups as each is extracted, so the
    caller stores one chunk while the next is extracted elsewhere (engine/parse_process.py)."""

    def chunks(self, episodes: Sequence[Episode], *, overlapped: bool = False) -> list[list[int]]:
        """The batch's positions in chunks, each of whole groups; one chunk when there is nothing to gain.
        `overlapped`: this process ingests other batches beside this one (now, or by design: the worker)."""

    async def extract_chunks(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]],
                             chunks: Sequence[list[int]], ready: ChunkReady) -> None:
        """`ready` awaited for each chunk in `chunks` order; raises when a chunk was lost (those after it too)."""
