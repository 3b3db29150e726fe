"""Promoted memories in recall: read for a request's groups, and put first in the context block.

Why a reserved share: promoted memories are what a user said must never be forgotten, so they must not compete
with recalled facts for the budget (a busy group would crowd them out). They get `budget_share` of the block,
listed first; what they leave unused goes to the recalled facts and messages. Their text is stored text like
any other and is escaped the same way (`render.neutralise`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mnemobus.engine.render import neutralise, render_context
from mnemobus.shared.groups import GroupId
from mnemobus.store.lifecycle import Lifecycle, Promoted
from mnemobus.store.model import RecallResult

PROMOTED_HEADER = "[Promoted memory]"


def promoted_line(m: Promoted) -> str:
    """One promoted memory as shown, escaped: its kind, then its text."""
    return f"{m.kind}: {neutralise(m.text)}"


async def promoted_for(store: object, groups: Sequence[GroupId], sessions: Sequence[str | None] | None,
                       limit: int, *, recall_since: float | None = None) -> list[Promoted]:
    """The promoted memories the groups hold for this conversation, newest first, one of each text.

    `recall_since`: asked from inside a recall that started then (`time.monotonic()`), whose reads already told
    the store which groups hold none (`Lifecycle.promoted_in_recall`)."""
    if not isinstance(store, Lifecycle) or limit <= 0:
        return []
    # one read for every group: one read a group cost 0.76 ms a request on SQLite (three thread hops)
    found = await (store.promoted_of(groups, sessions) if recall_since is None
                   else store.promoted_in_recall(groups, sessions, recall_since))
    found.sort(key=lambda m: (m.created_at, m.id), reverse=True)
    seen: set[str] = set()
    out: list[Promoted] = []
    for m in found:
        key = m.text.casefold()
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out[:limit]


def render_with_promoted(result: RecallResult, promoted: Sequence[Promoted], budget_chars: int,
                         share: float) -> str:
    """The context block: promoted memories first, within `share` of the budget (a line is dropped whole), then
    the recalled facts and messages in what is left."""
    lines: list[str] = []
    used = 0
    reserved = int(budget_chars * share)
    for m in promoted:
        line = f"- {promoted_line(m)}"
        cost = len(line) + 1 + (0 if lines else len(PROMOTED_HEADER) + 1)
        if used + cost > reserved:
            continue
        lines.append(line)
        used += cost
    head = "\n".join([PROMOTED_HEADER, *lines]) if lines else ""
    rest = render_context(result, budget_chars - used)
    return "\n".join(part for part in (head, rest) if part)
