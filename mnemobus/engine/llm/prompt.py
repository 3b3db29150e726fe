"""The messages of one extraction call: fixed instructions, then the candidates and the message as data.

The system message never changes, so servers that cache a prompt prefix (llama.cpp
reuses the previous request's) read it once. Everything stored (candidate names and
fact sentences) is neutralised as in the recall context block, and the message goes
in as a JSON string: neither can pose as an instruction or a section header.
"""

from __future__ import annotations

import json
from typing import Any

from mnemobus.engine.candidates import Candidates
from mnemobus.engine.llm.answer import ENTITY_KINDS
from mnemobus.engine.render import neutralise
from mnemobus.store.model import Episode

SYSTEM = (
    "You record long-term memory from one chat message. Reply with one JSON object "
    '{"entities": [...], "facts": [...]}.\n'
    "entities: the people, places, organizations, pets, products, events and dates the message names; "
    "type is one of " + ", ".join(ENTITY_KINDS) + "; same_as is the id of the KNOWN ENTITY it is, else null.\n"
    "facts: what the message states that stays true for a while, as subject, relation, object. Subject and "
    "object are entity names; I, me and my mean the speaker, written by name. relation is a short snake_case "
    "verb phrase (works_at, lives_in, sister_of, likes, owns). fact is the fact as one short sentence. "
    "valid_from is the date it began (YYYY-MM-DD) when the message says, else null. ended is true when the "
    "message says it no longer holds (stopped, quit, no longer, used to). duplicate_of is the id of the KNOWN "
    "FACT it repeats, contradicts the id of the KNOWN FACT it ends or replaces, else null.\n"
    "Record only what the message states. Questions, greetings and small talk give empty lists."
)

RETRY = "Your reply {problem}. Reply again with the corrected JSON object only."


def handles(candidates: Candidates) -> tuple[list[str], list[str]]:
    """The short ids the model refers to candidates by: E1.., F1.. (never a store id: those mean nothing to it)."""
    return ([f"E{i}" for i in range(1, len(candidates.entities) + 1)],
            [f"F{i}" for i in range(1, len(candidates.facts) + 1)])


def user_message(episode: Episode, speaker: str, candidates: Candidates, *, max_message_chars: int,
                 schema: dict[str, Any] | None = None) -> str:
    entity_ids, fact_ids = handles(candidates)
    lines: list[str] = []
    if candidates.entities:
        lines.append("KNOWN ENTITIES:")
        lines += [f"{h} {neutralise(e.name)} ({e.type})" for h, e in zip(entity_ids, candidates.entities, strict=True)]
    if candidates.facts:
        lines.append("KNOWN FACTS:")
        for h, f in zip(fact_ids, candidates.facts, strict=True):
            since = f" (since {f.valid_at.date().isoformat()})" if f.valid_at else ""
            lines.append(f"{h} {neutralise(f.fact)}{since}")
    if schema is not None:  # plain JSON mode: the shape can only travel in the prompt
        lines.append("Reply with JSON matching this schema: " + json.dumps(schema, separators=(",", ":")))
    text = episode.content[:max_message_chars]
    lines.append(f"MESSAGE from {neutralise(speaker)} on {episode.reference_time.date().isoformat()}:")
    lines.append(json.dumps(text, ensure_ascii=False))
    return "\n".join(lines)


def messages(episode: Episode, speaker: str, candidates: Candidates, *, max_message_chars: int,
             schema: dict[str, Any] | None = None) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": user_message(episode, speaker, candidates,
                                                     max_message_chars=max_message_chars, schema=schema)}]


def retry_messages(sent: list[dict[str, str]], reply: str, problem: str) -> list[dict[str, str]]:
    """The same conversation, the bad reply, and what was wrong with it: the one chance to mend it."""
    return [*sent, {"role": "assistant", "content": reply[:2000]},
            {"role": "user", "content": RETRY.format(problem=problem)}]


def approx_tokens(msgs: list[dict[str, str]]) -> int:
    """For the budget check before a call: ~4 characters a token, plus a few per message for the chat format."""
    return sum(len(m["content"]) // 4 + 4 for m in msgs)
