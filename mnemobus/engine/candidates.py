"""What the store already holds that an episode may repeat or contradict, chosen before extraction.

Why before: an extractor that sees the known entities and current facts next to
the message can say in the same answer that "Anna" is the Anna we know, that a
fact repeats one we hold, or that it ends one ("I moved to Lisbon" against "lives
in Berlin"). One model call then does what Graphiti spends separate dedupe calls on.

The choice is cheap and lexical: entities whose names share a word with the
message (full-text over names and aliases), plus the speaker's own entity, and the
facts valid at the message's time that touch them. It runs only for extractors that
ask for it (`CandidateAware`); the offline extractor never pays for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from mnemobus.engine.text import normalise_name, query_terms
from mnemobus.store.contract import GraphStore, neighbourhood
from mnemobus.store.model import Entity, Episode, Fact


@dataclass(frozen=True, slots=True)
class Candidates:
    entities: tuple[Entity, ...] = ()
    facts: tuple[Fact, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.entities and not self.facts


@runtime_checkable
class CandidateAware(Protocol):
    """An extractor that judges duplicates and contradictions against candidates the engine passes in."""

    max_candidate_entities: int
    max_candidate_facts: int

    def speaker_names(self, episode: Episode) -> list[str]:
        """The names the speaker of this episode may already be stored under."""

    async def extract_with(self, episode: Episode, candidates: Candidates):  # type: ignore[no-untyped-def]
        """Like `Extractor.extract`, with the candidates in view."""


async def preselect(store: GraphStore, episode: Episode, speaker_names: list[str], *, max_entities: int,
                    max_facts: int) -> Candidates:
    """Known entities named in the message (and the speaker's), and their facts valid at the message's time."""
    if max_entities <= 0:
        return Candidates()
    group = episode.group_id
    speakers = [t for name in speaker_names for t in query_terms(name)]
    terms = list(dict.fromkeys(speakers + query_terms(episode.content)))
    if not terms:
        return Candidates()
    hits = await store.search_entities_text(group, terms, max_entities * 2)
    entities = await store.get_entities(group, [h.id for h in hits])
    wanted = {normalise_name(n) for n in speaker_names}
    # the speaker first: their facts are what a first-person statement most often ends
    entities.sort(key=lambda e: e.canonical_name not in wanted)
    entities = entities[:max_entities]
    facts: list[Fact] = []
    if entities and max_facts > 0:
        hops = await neighbourhood(store, group, [e.id for e in entities], as_of=episode.reference_time, max_hops=1,
                                   limit=max_facts)
        facts = [h.fact for h in hops]
    return Candidates(tuple(entities), tuple(facts))
