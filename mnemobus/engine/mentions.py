"""The names a message says, beyond the entities its extraction returned: what links a turn to an entity the
group already knows when the extractor found no statement in it ("Biscuit chewed up my sneakers again!").

Why: graph recall reaches a turn through the entities it mentions (engine/graph_recall.py). An extractor
returns the entities of the facts it found, so a turn that only talks about a known pet, friend or place was
linked to nothing. Each capitalised run of words, and each of its words, is looked up as an alias of the group
in the episode's own transaction: a name resolves only to an entity that already exists, never makes one.
"""

from __future__ import annotations

import re

from mnemobus.engine.text import normalise_name

MAX_WORDS = 3  # "New York City"; longer capitalised runs are titles or shouting, looked up word by word
MAX_SPANS = 24  # per message: a pasted document must not turn one episode into hundreds of lookups
_RUN = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")


def named_spans(text: str) -> list[str]:
    """Normalised candidate names: each capitalised run of up to MAX_WORDS words whole, then its words, first
    said first, each once, at most MAX_SPANS."""
    out: dict[str, None] = {}
    for run in _RUN.finditer(text):
        words = run.group().split()
        for candidate in ([" ".join(words)] if len(words) <= MAX_WORDS else []) + words:
            name = normalise_name(re.sub(r"['’]s$", "", candidate))
            if name:
                out.setdefault(name, None)
    return list(out)[:MAX_SPANS]
