"""`/memory show | search <q> | clear [user]`: memory commands for chat adapters and the CLI.

A chat adapter sends the user's SkillRequest (same envelope as
`agent.skill.request`) as a NATS request to `memory.api.command`; the reply
goes only to that request's reply subject, never to a shared subject, so
one user's memory is never shown to a channel. The caller is whoever the
identity registry resolves the request's source to, exactly as for recall;
a bare canonical id (`cli:josh`) is believed only from a caller that showed
the API key or on a bus that enforces who may publish, and `clear` is
refused on a service that cannot tell who is asking.
"""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import Field

from mnemobus.api.core import Forbidden, MemoryService, NotFound
from mnemobus.api.promote_command import promote_command, show_promoted
from mnemobus.engine.render import item_line
from mnemobus.shared.envelope import ENVELOPE_VERSION, SkillRequest, WireModel
from mnemobus.shared.errors import InvalidMessage

PREFIX = "/memory"
USAGE = ("usage: /memory show [--promoted] | /memory search <words> | /memory clear [user]  (clear is for admins) | "
         "/memory promote [--kind decision|lesson|preference|procedure] [--scope session|workspace|user] <text>")
SHOW_LIMIT = 20


class CommandReply(WireModel):
    v: int = ENVELOPE_VERSION
    request_id: str
    command: Literal["show", "search", "clear", "promote", "help"]
    ok: bool
    text: str
    groups: list[str] = Field(default_factory=list)
    items: list[str] = Field(default_factory=list)


def parse(content: str) -> tuple[str, list[str]]:
    """`/memory search blue car` -> ("search", ["blue", "car"]); anything else is help."""
    try:
        words = shlex.split(content.strip())
    except ValueError:
        words = content.strip().split()
    if not words or words[0] != PREFIX:
        return "help", []
    if len(words) == 1 or words[1] not in ("show", "search", "clear", "promote"):
        return "help", []
    return words[1], words[2:]


async def run_command(svc: MemoryService, req: SkillRequest) -> CommandReply:
    """One command for the resolved caller; refusals are replies (ok=false) that say why."""
    command, args = parse(req.payload.content)

    def reply(ok: bool, text: str, **kw: list[str]) -> CommandReply:
        return CommandReply(request_id=req.id, command=command, ok=ok, text=text, **kw)  # type: ignore[arg-type]

    if command == "help":
        return reply(False, USAGE)
    who = svc.rt.identity.resolve(req.source.platform, req.source.user_id, req.payload.meta.agent_id,
                                  req.payload.meta.system_actor, trusted=svc.trusts_claims)
    if command == "clear":
        return await _clear(svc, who.user.id if who.user else None, args, reply)
    if not who.memory_on:
        return reply(False, f"no memory is kept for this caller ({who.reason})")
    groups = list(who.groups)
    if command == "promote":
        return await promote_command(svc, req, who, args, reply)
    if command == "show" and "--promoted" in args:
        return await show_promoted(svc, req, who, reply)
    if command == "show":
        facts = await svc.active_facts(who.groups, SHOW_LIMIT)
        lines = [f.fact for f in facts]
        text = f"{len(lines)} thing(s) remembered:\n" + "\n".join(f"- {x}" for x in lines) if lines else \
            "nothing remembered yet"
        return reply(True, text, groups=groups, items=lines)
    if not args:
        return reply(False, "usage: /memory search <words>")
    try:
        found = await svc.search(who.groups, " ".join(args), 10)
    except InvalidMessage as exc:
        return reply(False, exc.detail)
    lines = [item_line(item) for item in found]
    text = f"{len(lines)} match(es):\n" + "\n".join(f"- {x}" for x in lines) if lines else "no matches"
    return reply(True, text, groups=groups, items=lines)


async def _clear(svc: MemoryService, claimed: str | None, args: list[str], reply) -> CommandReply:  # type: ignore[no-untyped-def]
    """`claimed` is whom the request's source resolves to; the actor is whoever the request proved to be."""
    from mnemobus.api.callers import current_caller, proven_actor
    from mnemobus.api.gdpr import hard_delete_user

    caller = current_caller.get()
    if caller.owner is None and caller.bus_role and claimed is None:
        return reply(False, "/memory clear is for admins listed in users.yaml; you are not a known user")
    try:
        actor, proof = proven_actor(caller, claimed)
    except Forbidden as exc:
        return reply(False, f"/memory clear: {exc}")
    target = args[0] if args else actor
    try:
        event = await hard_delete_user(svc, target, actor=actor, proof=proof)
    except Forbidden:
        return reply(False, "/memory clear is for admins only; ask an admin to erase memory")
    except NotFound as exc:
        return reply(False, str(exc))
    return reply(True, f"erased all memory of {target}: {len(event.groups)} group(s), {event.episodes} episode(s), "
                       f"{event.facts} fact(s), {event.entities} entit(ies)", groups=event.groups)
