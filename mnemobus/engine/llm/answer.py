"""The shape of the model's answer: a JSON schema sent with the call, and the pydantic model that checks it.

The schema is built per call: when the engine passed in candidates, the judgement
fields (`same_as`, `duplicate_of`, `contradicts`) accept exactly their ids, and
when it passed none those fields are not offered at all (fewer tokens, nothing to
invent). Every array has `maxItems` and every string `maxLength`: a small model
under a grammar otherwise repeats itself until `max_tokens` and the JSON is cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

# the engine's entity types, minus "agent" (a speaker's type, never the model's to give)
ENTITY_KINDS: tuple[str, ...] = ("person", "place", "organization", "pet", "product", "event", "date", "technology",
                                 "project", "concept", "food", "activity", "condition", "thing")
EntityKind = Literal["person", "place", "organization", "pet", "product", "event", "date", "technology", "project",
                     "concept", "food", "activity", "condition", "thing"]

MAX_ENTITIES = 6  # defaults of llm.max_entities and llm.max_facts
MAX_FACTS = 6
MAX_ITEMS = 32  # the most either may be configured to
MAX_NAME_CHARS = 48
MAX_RELATION_CHARS = 32
MAX_FACT_CHARS = 100
_CHARS_PER_TOKEN = 3  # JSON of names and short sentences, pessimistic (digits and punctuation cost a token each)


def longest_answer_tokens(max_entities: int = MAX_ENTITIES, max_facts: int = MAX_FACTS) -> int:
    """About the most tokens an answer the schema allows can take: below it, a model that fills every bound (small
    ones do) is cut off by max_tokens, and a cut answer is invalid JSON."""
    entity = MAX_NAME_CHARS + 40  # keys, the type, same_as and punctuation
    fact = 2 * MAX_NAME_CHARS + MAX_RELATION_CHARS + MAX_FACT_CHARS + 110  # keys, date, flags, judgements
    return (max_entities * entity + max_facts * fact + 30) // _CHARS_PER_TOKEN
_RELATION_JUNK = re.compile(r"[^a-z0-9]+")


class _Strictish(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)


class AnswerEntity(_Strictish):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    type: EntityKind = "thing"
    same_as: str | None = None


class AnswerFact(_Strictish):
    subject: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    relation: str = Field(min_length=1, max_length=MAX_RELATION_CHARS)
    object: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    fact: str = Field(default="", max_length=MAX_FACT_CHARS)
    valid_from: date | None = None
    ended: bool = False
    duplicate_of: str | None = None
    contradicts: str | None = None

    @field_validator("relation")
    @classmethod
    def _snake(cls, v: str) -> str:
        """"Works At", "works-at" and "works_at" are one relation."""
        out = _RELATION_JUNK.sub("_", v.lower()).strip("_")
        if not out:
            raise ValueError("relation has no letters or digits")
        return out


class Answer(_Strictish):
    entities: list[AnswerEntity] = Field(default_factory=list, max_length=MAX_ITEMS)
    facts: list[AnswerFact] = Field(default_factory=list, max_length=MAX_ITEMS)

    @model_validator(mode="after")
    def _known_ids(self, info: ValidationInfo) -> Answer:
        """A judgement must name a candidate the engine passed in; anything else is an invented id."""
        ctx = info.context or {}
        entity_ids, fact_ids = set(ctx.get("entity_ids", ())), set(ctx.get("fact_ids", ()))
        for what, items, most in (("entities", self.entities, ctx.get("max_entities", MAX_ENTITIES)),
                                  ("facts", self.facts, ctx.get("max_facts", MAX_FACTS))):
            if len(items) > most:
                raise ValueError(f"{what} has {len(items)} items; at most {most}")
        for i, e in enumerate(self.entities):
            if e.same_as is not None and e.same_as not in entity_ids:
                raise ValueError(f"entities[{i}].same_as {e.same_as!r} is not a KNOWN ENTITY id")
        for i, f in enumerate(self.facts):
            for field in ("duplicate_of", "contradicts"):
                value = getattr(f, field)
                if value is not None and value not in fact_ids:
                    raise ValueError(f"facts[{i}].{field} {value!r} is not a KNOWN FACT id")
        return self


def _text(max_chars: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_chars}


def _choice(ids: Sequence[str]) -> dict[str, Any]:
    return {"anyOf": [{"type": "string", "enum": list(ids)}, {"type": "null"}]}


def answer_schema(entity_ids: Sequence[str] = (), fact_ids: Sequence[str] = (), *, max_entities: int = MAX_ENTITIES,
                  max_facts: int = MAX_FACTS) -> dict[str, Any]:
    """Every property required (a fixed shape is what a small model follows best), all bounded."""
    entity: dict[str, Any] = {"name": _text(MAX_NAME_CHARS), "type": {"type": "string", "enum": list(ENTITY_KINDS)}}
    if entity_ids:
        entity["same_as"] = _choice(entity_ids)
    fact: dict[str, Any] = {
        "subject": _text(MAX_NAME_CHARS), "relation": _text(MAX_RELATION_CHARS), "object": _text(MAX_NAME_CHARS),
        "fact": _text(MAX_FACT_CHARS),
        "valid_from": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        "ended": {"type": "boolean"},
    }
    if fact_ids:
        fact["duplicate_of"] = _choice(fact_ids)
        fact["contradicts"] = _choice(fact_ids)

    def obj(props: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}

    return obj({
        "entities": {"type": "array", "items": obj(entity), "maxItems": max_entities},
        "facts": {"type": "array", "items": obj(fact), "maxItems": max_facts},
    })


class InvalidAnswer(ValueError):
    """The model's text is not an answer we can use; the message is what the model is told on its retry."""


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_answer(text: str, entity_ids: Sequence[str] = (), fact_ids: Sequence[str] = (), *,
                 max_entities: int = MAX_ENTITIES, max_facts: int = MAX_FACTS) -> Answer:
    """strict=False: grammar-constrained servers let raw newlines into strings, which strict JSON refuses."""
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        data = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        cut = "" if text.rstrip().endswith("}") else " (it was cut off: keep it shorter)"
        raise InvalidAnswer(f"is not valid JSON: {exc.msg} at character {exc.pos}{cut}") from exc
    try:
        return Answer.model_validate(data, context={"entity_ids": entity_ids, "fact_ids": fact_ids,
                                                    "max_entities": max_entities, "max_facts": max_facts})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()[:5])
        raise InvalidAnswer(f"does not match the schema: {problems}") from exc
