"""`/memory promote ...` and `/memory show --promoted`, typed in a request to `memory.api.command`.

Split from `commands.py` so the chat command and the API operation share one `promote` (its identity rules
included, see `api.lifecycle`): the caller is whom the request's source resolves to, and, as for
`/memory clear`, that claim must be proven before anything is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from mnemobus.api.core import Forbidden, MemoryService, NotFound
from mnemobus.api.lifecycle import PromoteRequest, promote
from mnemobus.engine.promoted import promoted_for, promoted_line
from mnemobus.shared.envelope import SkillRequest
from mnemobus.shared.errors import InvalidMessage
from mnemobus.shared.identity import Resolution
from mnemobus.store.lifecycle import PROMOTED_KINDS, PROMOTED_SCOPES

PROMOTE_USAGE = ("usage: /memory promote [--kind decision|lesson|preference|procedure] "
                 "[--scope session|workspace|user] <text>")


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # type: ignore[override]
        raise _Refused(message)


def _parser() -> _Parser:
    p = _Parser(prog="/memory promote", add_help=False)
    p.add_argument("--kind", choices=PROMOTED_KINDS, default="preference")
    p.add_argument("--scope", choices=PROMOTED_SCOPES, default="user")
    p.add_argument("text", nargs="*")
    return p


async def promote_command(svc: MemoryService, req: SkillRequest, who: Resolution, args: list[str],
                          reply: Callable[..., Any]) -> Any:
    try:
        parsed = _parser().parse_args(args)
    except _Refused as exc:
        return reply(False, f"{exc}; {PROMOTE_USAGE}")
    text = " ".join(parsed.text).strip()
    if not text:
        return reply(False, PROMOTE_USAGE)
    if who.user is None:
        return reply(False, "/memory promote is for users listed in users.yaml; you are not a known user")
    q = PromoteRequest(text=text, kind=parsed.kind, scope=parsed.scope, user_id=who.user.id,
                       agent_id=req.payload.meta.agent_id, session=req.source.channel_id)
    try:
        memory = await promote(svc, q, claimed=who.user.id)
    except (Forbidden, NotFound) as exc:
        return reply(False, f"/memory promote: {exc}")
    except InvalidMessage as exc:
        return reply(False, f"/memory promote: {exc.detail}")
    return reply(True, f"promoted ({memory.kind}, scope {memory.scope}): it will not be forgotten",
                 groups=[memory.group_id], items=[promoted_line(memory)])


async def show_promoted(svc: MemoryService, req: SkillRequest, who: Resolution, reply: Callable[..., Any]) -> Any:
    found = await promoted_for(svc.store, who.groups, [req.source.channel_id], limit=1000)
    lines = [promoted_line(m) for m in found]
    text = f"{len(lines)} promoted memor(ies):\n" + "\n".join(f"- {x}" for x in lines) if lines else \
        "nothing promoted yet"
    return reply(True, text, groups=list(who.groups), items=lines)
