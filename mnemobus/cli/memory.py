"""`mnemobus memory show|search|clear|promote`: the /memory commands from a terminal.

The CLI is one more requester of the running memory service
(`memory.api.command` on the configured NATS), so the same identity rules,
admin check and audit apply as in chat. The operator names the user they
act as with `--user` (a canonical id from users.yaml).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.shared.envelope import Meta, Payload, SkillRequest, Source
from mnemobus.store.lifecycle import PROMOTED_KINDS, PROMOTED_SCOPES
from mnemobus.kernel import eventloop


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("memory", help="show, search or clear memory (asks the running memory service)")
    cmds = p.add_subparsers(dest="memory_command", required=True, metavar="show|search|clear|promote")
    show = cmds.add_parser("show", help="the facts memory holds as true now about the user")
    show.add_argument("--promoted", action="store_true", help="the user's promoted memories instead")
    search = cmds.add_parser("search", help="search the user's memory")
    search.add_argument("query", nargs="+")
    clear = cmds.add_parser("clear", help="erase a user's memory entirely (admins only)")
    clear.add_argument("target", nargs="?", help="canonical user id to erase (default: the --user itself)")
    promote = cmds.add_parser("promote", help="keep a memory for good: never decayed, never evicted")
    promote.add_argument("--kind", choices=PROMOTED_KINDS, required=True)
    promote.add_argument("--scope", choices=PROMOTED_SCOPES, default="user")
    promote.add_argument("text", nargs="+")
    for c in (show, search, clear, promote):
        c.add_argument("--user", required=True, help="canonical user id from users.yaml you act as")
        c.add_argument("--agent", default="cli", help="agent whose per-agent view is included (default: cli)")
        c.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the service")
        c.set_defaults(handler=handle)


def standalone_parser() -> argparse.ArgumentParser:
    """The `memory` command alone, for tests and for embedding in another CLI."""
    parser = argparse.ArgumentParser(prog="mnemobus")
    mnemobus_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def command_text(args: argparse.Namespace) -> str:
    words = ["/memory", args.memory_command]
    if args.memory_command == "search":
        words += args.query
    elif args.memory_command == "clear" and args.target:
        words.append(args.target)
    elif args.memory_command == "show" and args.promoted:
        words.append("--promoted")
    elif args.memory_command == "promote":
        words += ["--kind", args.kind, "--scope", args.scope, "--", " ".join(args.text)]
    return shlex.join(words)


async def ask(settings: Settings, request: SkillRequest, timeout_s: float) -> dict:
    from mnemobus.cli.api_client import request_api

    return await request_api(settings, "command", request.to_wire(), timeout_s, "memory")


def handle(settings: Settings, args: argparse.Namespace) -> int:
    """0 when the command did what was asked; 1 when it was refused or failed (the reason on stderr)."""
    request = SkillRequest(source=Source(platform="cli", user_id=args.user),
                           payload=Payload(skill="memory", content=command_text(args), meta=Meta(agent_id=args.agent)))
    try:
        reply = eventloop.run(lambda: ask(settings, request, args.timeout), settings.event_loop)
    except Exception as exc:  # no server, timeout, refusal: say it, exit non-zero
        print(f"mnemobus memory: {exc}", file=sys.stderr)
        return 1
    print(reply["text"], file=sys.stdout if reply["ok"] else sys.stderr)
    return 0 if reply["ok"] else 1
