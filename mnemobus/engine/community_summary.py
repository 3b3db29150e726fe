"""A community's summary: offline from its most central members and facts, or one LLM call.

The summary is what recall matches a community by (its vector), so even the offline one names the entities
and relations that hold the community together. The LLM one (engine/llm/community_summary.py) gets the same
material, each stored string JSON-quoted (stored text never reaches a prompt as instructions), cut to a prompt size cap; a failed call
falls back to the offline text, counted, so a dead model never stops a refresh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

OFFLINE_CHARS = 400


@dataclass(frozen=True, slots=True)
class Sketch:
    """What a summary is made from: member names and fact sentences, most central first."""

    names: tuple[str, ...]
    facts: tuple[str, ...]


class Summariser(Protocol):
    name: str

    async def summarise(self, sketch: Sketch) -> str: ...


def offline_summary(sketch: Sketch) -> str:
    text = ", ".join(sketch.names)
    if sketch.facts:
        text += ": " + "; ".join(sketch.facts)
    return text if len(text) <= OFFLINE_CHARS else text[: OFFLINE_CHARS - 1] + "…"


class OfflineSummariser:
    name = "offline"

    async def summarise(self, sketch: Sketch) -> str:
        return offline_summary(sketch)


def prompt(sketch: Sketch, max_chars: int) -> str:
    """The user message: quoted names, then quoted facts while they fit `max_chars` (names always kept)."""
    lines = ["Members: " + ", ".join(json.dumps(n, ensure_ascii=False) for n in sketch.names), "Facts:"]
    size = sum(len(line) + 1 for line in lines)
    for fact in sketch.facts:
        line = "- " + json.dumps(fact, ensure_ascii=False)
        if size + len(line) + 1 > max_chars:
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:max_chars]
