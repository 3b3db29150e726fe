"""Recall results -> the context block put into a prompt, escaped and within a size budget."""

from __future__ import annotations

import re

from mnemobus.store.model import RecallResult, ScoredEpisode, ScoredFact

_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
#: every Unicode format character (category Cf, Unicode 14: a test holds it to Python's unicodedata): bidi
#: overrides and isolates (U+202A-202E, U+2066-2069) that show text in another order than it is read, zero-width
#: characters (U+200B-200F, U+2060-2064, U+FEFF) that hide inside words, and tag characters (U+E0000-E007F) that
#: spell text nobody sees. Written out: finding them in unicodedata takes half a second at every start
FORMAT_CHARACTERS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")


def neutralise(text: str) -> str:
    """Stored strings are data: no line breaks (a stored line could pose as a header), no angle brackets, quotes
    escaped (a stored message is shown in quotes it could otherwise close), no control or format characters."""
    text = _CONTROL.sub("", _BREAKS.sub(" ", text))
    if not text.isascii():  # every format character is outside ASCII; most stored text is not
        text = FORMAT_CHARACTERS.sub("", text)
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return text.replace("<", "\u2039").replace(">", "\u203a").strip()


def _date(value: object) -> str:
    return value.date().isoformat() if value is not None else ""  # type: ignore[attr-defined]


#: characters of a source message shown in a context block (the whole message stays stored)
MESSAGE_CHARS = 300


def item_line(item: ScoredFact | ScoredEpisode) -> str:
    """What one recalled item says, escaped: a fact with the day it became true, or a message with its day."""
    if isinstance(item, ScoredFact):
        text = neutralise(item.fact.fact)
        if text and (q := item.fact.qualifier) and q.casefold() not in text.casefold():
            text += f" (for {neutralise(q)})"  # "takes ramipril (for hypertension)": what it is for
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


#: the header the user's own message follows in an enriched request
USER_MESSAGE_HEADER = "[User message]"
#: the line breaks a screen breaks a line at (kept, as the user typed them)
_LINE_BREAK = re.compile(r"(\r\n|[\r\n\u2028\u2029\x0b\x0c\x85])")


def user_message(text: str) -> str:
    """The user's words as they go to the agent: unchanged, except that a line opening with `[` (after any
    blank), the way every header the system writes does, opens with `\\[` (markdown's own escape of a bracket),
    and format characters go, so no line the user typed reads as `[User context — user_josh]`."""
    if not text.isascii():
        text = FORMAT_CHARACTERS.sub("", text)
    if "[" not in text:
        return text
    parts = _LINE_BREAK.split(text)  # lines at even places, the breaks between them at odd ones
    for i in range(0, len(parts), 2):
        line = parts[i]
        blank = len(line) - len(line.lstrip())
        if line[blank:blank + 1] == "[":
            parts[i] = f"{line[:blank]}\\{line[blank:]}"
    return "".join(parts)


def enriched_content(block: str, message: str) -> str:
    """What the agent is sent: the memory block, then the user's message under its own header."""
    said = user_message(message)
    return f"{block}\n\n{USER_MESSAGE_HEADER}\n{said}" if block else said
