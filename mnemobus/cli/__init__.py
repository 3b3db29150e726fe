"""`mnemobus`: one subcommand per module in this package, each a thin call into the library.

Every command, `run` and `doctor` included, comes in through the `mnemobus_commands` hook, so a command an
installed package adds is a peer of the built-in ones.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from mnemobus.kernel import extensions
from mnemobus.shared.config import Settings, field_origin, load_settings
from mnemobus.shared.errors import ConfigError, MnemobusError
from mnemobus.shared.redact import RedactingFormatter, mask_urls, redact, secret_values

EPILOG = """\
examples:
  mnemobus run                      everything in one process (embedded nats-server and SQLite store)
  mnemobus run --demo --once        play the scripted conversation, then exit (0 when it worked)
  mnemobus run --role worker        just the extraction worker, e.g. a second one next to the first
  mnemobus doctor --smoke           check config, NATS and the store, and write+delete a test group

config: workspace/mnemobus.yaml (or --config / MNEMOBUS_CONFIG); any key can be overridden from the
environment as MNEMOBUS_<SECTION>__<KEY>, e.g. MNEMOBUS_NATS__URL=nats://10.0.0.5:4222
"""


def _setup_logging(level: str, secrets: list[str]) -> None:
    """Every log line through one formatter that masks URL passwords and the configured secrets."""
    logging.basicConfig(level=getattr(logging, level), stream=sys.stderr)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s", secrets))
    logging.getLogger("nats").setLevel(logging.WARNING)


def say(line: str) -> None:
    """How a command narrates to the terminal (a URL's password masked)."""
    print(mask_urls(line), flush=True)


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
    p.add_argument("-C", dest="chdir", metavar="DIR", help="run as if started in DIR, the checkout whose "
                   "workspace/ and data/ to use (for an MCP client that starts `mnemobus mcp` elsewhere)")
    p.add_argument("--config", help="path to the YAML config (default: workspace/mnemobus.yaml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    extensions.add_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.chdir:
            os.chdir(args.chdir)
        settings: Settings = load_settings(args.config)
        extensions.check_parts(settings, lambda loc: field_origin(loc, args.config))
    except (ConfigError, OSError) as exc:
        print(f"mnemobus: configuration refused: {exc}", file=sys.stderr)
        return 2
    hidden = secret_values(settings)
    _setup_logging(settings.log_level, hidden)
    try:
        try:
            return int(args.handler(settings, args))
        except BaseExceptionGroup as group:  # a role that failed inside the process's task group
            raise _first_known(group) or group from None
    except ConfigError as exc:
        print(f"mnemobus: configuration refused: {redact(str(exc), hidden)}", file=sys.stderr)
        return 2
    except MnemobusError as exc:
        print(f"mnemobus: {redact(str(exc), hidden)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
