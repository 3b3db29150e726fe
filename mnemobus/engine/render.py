"""Recall results -> the context block put into a prompt, escaped and within a size budget."""

from __future__ import annotations

import re

from mnemobus.store.model import RecallResult

_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def neutralise(text: str) -> str:
    """Stored strings are data: no line breaks (a stored line could pose as a header) and no angle brackets."""
    text = _BREAKS.sub(" ", text)
    text = _CONTROL.sub("", text)
    return text.replace("<", "\u2039").replace(">", "\u203a").strip()


def _date(value: object) -> str:
    return value.date().isoformat() if value is not None else ""  # type: ignore[attr-defined]


def render_context(result: RecallResult, budget_chars: int) -> str:
    """One header per group, one fact per line (best first), then source messages if room is left.

    A fact sentence seen in several groups is shown once, under the first group
    that has it. Lines are dropped whole, never cut, once the budget is reached.
    """
    if result.empty or budget_chars <= 0:
        return ""
    sections: dict[str, list[str]] = {}
    seen: set[str] = set()
    order = list(dict.fromkeys([*result.groups, *(sf.fact.group_id for sf in result.facts),
                                *(se.episode.group_id for se in result.episodes)]))
    for sf in result.facts:
        text = neutralise(sf.fact.fact)
        key = text.casefold()
        if not text or key in seen:
            continue
        seen.add(key)
        since = _date(sf.fact.valid_at)
        sections.setdefault(sf.fact.group_id, []).append(f"- {text}" + (f" (since {since})" if since else ""))
    for se in result.episodes:
        text = neutralise(se.episode.content)
        if len(text) > 300:
            text = text[:297].rstrip() + "..."
        key = text.casefold()
        if not text or key in seen:
            continue
        seen.add(key)
        when = _date(se.episode.reference_time)
        sections.setdefault(se.episode.group_id, []).append(f"- said{f' on {when}' if when else ''}: \"{text}\"")
    out: list[str] = []
    used = 0
    for group in order:
        lines = sections.get(group)
        if not lines:
            continue
        header = f"[User context \u2014 {neutralise(group)}]"
        if used + len(header) + 1 + len(lines[0]) + 1 > budget_chars:
            break
        out.append(header)
        used += len(header) + 1
        for line in lines:
            if used + len(line) + 1 > budget_chars:
                break
            out.append(line)
            used += len(line) + 1
    return "\n".join(out)
