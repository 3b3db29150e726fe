"""Recall results -> the context block put into a prompt, escaped and within a size budget."""

from __future__ import annotations

import re

from mnemobus.store.model import RecallResult, ScoredEpisode, ScoredFact

_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def neutralise(text: str) -> str:
    """Stored strings are data: no line breaks (a stored line could pose as a header) and no angle brackets."""
    text = _BREAKS.sub(" ", text)
    text = _CONTROL.sub("", text)
    return text.replace("<", "\u2039").replace(">", "\u203a").strip()


def _date(value: object) -> str:
    return value.date().isoformat() if value is not None else ""  # type: ignore[attr-defined]


#: characters of a source message shown in a context block (the whole message stays stored)
MESSAGE_CHARS = 300


def item_line(item: ScoredFact | ScoredEpisode) -> str:
    """What one recalled item says, escaped: a fact with the day it became true, or a message with its day."""
    if isinstance(item, ScoredFact):
        text = neutralise(item.fact.fact)
        since = _date(item.fact.valid_at)
        return text + (f" (since {since})" if since and text else "")
    text = neutralise(item.episode.content)
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 3].rstrip() + "..."
    when = _date(item.episode.reference_time)
    return f"said{f' on {when}' if when else ''}: \"{text}\"" if text else ""


def _group_of(item: ScoredFact | ScoredEpisode) -> str:
    return item.fact.group_id if isinstance(item, ScoredFact) else item.episode.group_id


def render_context(result: RecallResult, budget_chars: int) -> str:
    """Facts and source messages in their one ranking, under a header per group, within the budget.

    Lines are chosen best first until the budget is spent (a line is dropped whole, never cut), then laid out
    by group: groups in the order of their best line, lines within a group in rank order. A text seen in
    several groups is shown once, under the group that ranked it best.
    """
    if result.empty or budget_chars <= 0:
        return ""
    chosen: dict[str, list[str]] = {}
    seen: set[str] = set()
    used = 0
    for item in result.ranked():
        line = item_line(item)
        key = line.casefold()
        if not line or key in seen:
            continue
        group = _group_of(item)
        cost = len(line) + 3  # "- " and the newline
        if group not in chosen:
            cost += len(_header(group)) + 1
        if used + cost > budget_chars:
            continue  # a shorter line further down may still fit
        seen.add(key)
        used += cost
        chosen.setdefault(group, []).append(f"- {line}")
    out: list[str] = []
    for group, lines in chosen.items():
        out.append(_header(group))
        out.extend(lines)
    return "\n".join(out)


def _header(group: str) -> str:
    return f"[User context \u2014 {neutralise(group)}]"
