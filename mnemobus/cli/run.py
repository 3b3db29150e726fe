"""`mnemobus run`: one role, or all of them, until Ctrl-C."""

from __future__ import annotations

import argparse

from mnemobus.kernel import extensions
from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel import eventloop

def _handle(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.kernel.app import run
    from mnemobus.cli import say

    demo = args.demo or args.once
    echo = None if args.quiet else say
    return eventloop.run(lambda: run(settings, args.role, demo=demo, once=args.once, echo=echo), settings.event_loop)


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    run = subcommands.add_parser("run", help="run one role, or all of them, until Ctrl-C")
    roles = [*extensions.roles(), "all"]
    run.add_argument("--role", choices=roles, default="all",
                     help="plugin: enrich agent.skill.request; worker: store episodes; api: memory service; "
                          "worldstate: probes, goals, metrics; installed packages may add more (default: all)")
    run.add_argument("--demo", action="store_true", help="start the echo executor and play a short conversation")
    run.add_argument("--once", action="store_true", help="exit after the demo (implies --demo); exit code 0 if it worked")
    run.add_argument("--quiet", action="store_true", help="do not narrate what each component does")
    run.set_defaults(handler=_handle)
