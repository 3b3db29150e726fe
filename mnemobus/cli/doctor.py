"""`mnemobus doctor`: what works and what does not, in the order a newcomer would check."""

from __future__ import annotations

import argparse

from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel import eventloop


def _handle(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.cli import say
    from mnemobus.kernel.doctor import doctor

    return eventloop.run(lambda: doctor(settings, smoke=args.smoke, repair=args.repair, say=say), settings.event_loop)


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    doc = subcommands.add_parser("doctor", help="check config, NATS and the store; say what is wrong")
    doc.add_argument("--smoke", action="store_true", help="also write, read back and delete a temporary group")
    doc.add_argument("--repair", action="store_true", help="rebuild a damaged full-text index from its rows")
    doc.set_defaults(handler=_handle)
