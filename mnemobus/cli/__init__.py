"""`mnemobus`: one subcommand per module in this package, each a thin call into the library.

Every command, `run` and `doctor` included, comes in through the `mnemobus_commands` hook, so a command an
installed package adds is a peer of the built-in ones.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from mnemobus import extensions
from mnemobus.config import Settings, load_settings
from mnemobus.errors import ConfigError, MnemobusError

EPILOG = """\
examples:
  mnemobus run                      everything in one process (embedded nats-server and SQLite store)
  mnemobus run --demo --once        play the scripted conversation, then exit (0 when it worked)
  mnemobus run --role worker        just the extraction worker, e.g. a second one next to the first
  mnemobus doctor --smoke           check config, NATS and the store, and write+delete a test group

config: workspace/mnemobus.yaml (or --config / MNEMOBUS_CONFIG); any key can be overridden from the
environment as MNEMOBUS_<SECTION>__<KEY>, e.g. MNEMOBUS_NATS__URL=nats://10.0.0.5:4222
"""


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    logging.getLogger("nats").setLevel(logging.WARNING)


def say(line: str) -> None:
    """How a command narrates to the terminal."""
    print(line, flush=True)


def _first_known(group: BaseExceptionGroup) -> BaseException | None:
    """The error the user should read out of a task group's failures: a refused config or a named problem."""
    for exc in group.exceptions:
        found = _first_known(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if isinstance(found, (ConfigError, MnemobusError, KeyboardInterrupt)):
            return found
    return None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mnemobus", description="Long-term memory for AI agents on a NATS bus.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="path to the YAML config (default: workspace/mnemobus.yaml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    extensions.add_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings: Settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"mnemobus: configuration refused: {exc}", file=sys.stderr)
        return 2
    _setup_logging(settings.log_level)
    try:
        try:
            return int(args.handler(settings, args))
        except BaseExceptionGroup as group:  # a role that failed inside the process's task group
            raise _first_known(group) or group from None
    except ConfigError as exc:
        print(f"mnemobus: configuration refused: {exc}", file=sys.stderr)
        return 2
    except MnemobusError as exc:
        print(f"mnemobus: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
