"""The model's answer as the engine's Extraction: its judgements become names, replacements and endings.

- first person ("I", "me", the speaker's name as the model wrote it) -> the episode's speaker entity;
- `same_as: E2` -> the entity is written under the known entity's name (and type), so ingest resolves it to that
  entity; the name the model used becomes an alias of it;
- `duplicate_of: F1` -> the fact is written as the known fact (same subject, relation, object): ingest reinforces it;
- `contradicts: F3` -> the known fact ends: when the new fact has its subject and relation, as the object the new
  fact replaces (ingest links the two), otherwise as an ending of its own;
- `ended: true` -> an ending (of the known fact it names, else of the fact as stated), its cause the message;
- `valid_from` -> when the fact took effect, at 00:00 UTC of that date; a date more than a year after the message
  is taken for a slip and left out.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from mnemobus.engine.candidates import Candidates
from mnemobus.engine.extract import (
    UNTYPED, ExtractedEnding, ExtractedEntity, ExtractedFact, Extraction, Speaker, entities_of,
)
from mnemobus.engine.llm.answer import Answer, AnswerFact
from mnemobus.engine.text import display_name, normalise_name
from mnemobus.store.model import Fact

_FIRST_PERSON = frozenset({"i", "me", "my", "myself", "mine", "we", "us", "our", "the speaker", "speaker"})
LLM_CONFIDENCE = 0.75
_CAUSE_CHARS = 160
_LATEST_FUTURE = timedelta(days=366)


def _sentence(subject: str, relation: str, obj: str) -> str:
    return f"{subject} {relation.replace('_', ' ')} {obj}"


class _Names:
    """One spelling and one type per name (ingest looks entities up by the exact name a fact uses)."""

    def __init__(self, speaker: Speaker) -> None:
        self.speaker = speaker
        self.spelling: dict[str, str] = {}
        self.types: dict[str, str] = {normalise_name(speaker.entity_name): speaker.entity_type}
        self.aliases: dict[str, list[str]] = {}
        self._speaker_keys = {normalise_name(speaker.entity_name)} | _FIRST_PERSON
        if speaker.role in ("user", "assistant", "system"):
            self._speaker_keys.add(speaker.role)

    def name(self, raw: str) -> str:
        key = normalise_name(raw)
        if key in self._speaker_keys:
            return self.speaker.entity_name
        return self.spelling.setdefault(key, display_name(raw))

    def type_of(self, name: str) -> str:
        return self.types.get(normalise_name(name), UNTYPED)

    def same_as(self, raw: str, known_name: str, known_type: str) -> None:
        key = normalise_name(raw)
        if key in self._speaker_keys or key == normalise_name(known_name):
            return
        self.spelling[key] = known_name
        self.types[normalise_name(known_name)] = known_type
        self.aliases.setdefault(known_name, []).append(display_name(raw))


def to_extraction(answer: Answer, candidates: Candidates, speaker: Speaker, message: str,
                  reference_time: datetime) -> Extraction:
    known_entities = {f"E{i}": e for i, e in enumerate(candidates.entities, 1)}
    known_facts: dict[str, Fact] = {f"F{i}": f for i, f in enumerate(candidates.facts, 1)}
    names = _Names(speaker)
    for e in answer.entities:
        known = known_entities.get(e.same_as) if e.same_as else None
        if known is not None:
            names.same_as(e.name, known.name, known.type)
        names.types.setdefault(normalise_name(names.name(e.name)), e.type)
    cause = display_name(message)[:_CAUSE_CHARS]

    facts: list[ExtractedFact] = []
    endings: list[ExtractedEnding] = []
    for f in answer.facts:
        subject, relation, obj = names.name(f.subject), f.relation, names.name(f.object)
        if normalise_name(subject) == normalise_name(obj):
            continue
        dup = known_facts.get(f.duplicate_of) if f.duplicate_of else None
        old = known_facts.get(f.contradicts) if f.contradicts else None
        if f.ended:  # the statement is that something no longer holds
            gone = old or dup
            if gone is not None:
                endings.append(_ending_of(gone, cause))
            else:
                sentence = f.fact or _sentence(subject, relation, obj)
                endings.append(ExtractedEnding(subject, relation, obj, cause, sentence, names.type_of(subject),
                                               names.type_of(obj)))
            continue
        replaces: str | None = None
        if dup is not None:
            subject, relation, obj = dup.subject_name, dup.relation, dup.object_name
        elif old is not None:
            if normalise_name(old.subject_name) == normalise_name(subject) and old.relation == relation:
                replaces = old.object_name
            else:
                endings.append(_ending_of(old, cause))
        facts.append(ExtractedFact(
            subject, relation, obj, "temporal" if replaces else "semantic",
            f.fact or _sentence(subject, relation, obj), LLM_CONFIDENCE, names.type_of(subject), names.type_of(obj),
            replaces, _valid_from(f, reference_time)))

    unique = tuple(dict.fromkeys(facts))
    aliases = {k: tuple(dict.fromkeys(v)) for k, v in names.aliases.items()}
    found = {normalise_name(e.name): e for e in entities_of(unique, endings, [speaker], aliases)}
    for e in answer.entities:  # named by the model though no fact mentions them: still worth knowing
        name = names.name(e.name)
        found.setdefault(normalise_name(name), ExtractedEntity(name, names.type_of(name)))
    for name, more in aliases.items():  # a known entity called by another name here
        key = normalise_name(name)
        if key in found and not found[key].aliases:
            found[key] = ExtractedEntity(found[key].name, found[key].type, found[key].speaker_role, more)
    return Extraction(tuple(found.values()), unique, tuple(dict.fromkeys(endings)))


def _ending_of(fact: Fact, cause: str) -> ExtractedEnding:
    return ExtractedEnding(fact.subject_name, fact.relation, fact.object_name, cause, fact.fact,
                           edge_type=fact.edge_type)


def _valid_from(f: AnswerFact, reference_time: datetime) -> datetime | None:
    if f.valid_from is None:
        return None
    when = datetime.combine(f.valid_from, time(0), tzinfo=UTC)
    return None if when > reference_time + _LATEST_FUTURE else when
