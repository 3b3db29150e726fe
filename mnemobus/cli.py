"""`mnemobus`: one subcommand per job, each a thin call into the library."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import anyio

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


def _say(line: str) -> None:
    print(line, flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mnemobus", description="Long-term memory for AI agents on a NATS bus.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="path to the YAML config (default: workspace/mnemobus.yaml)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run one role, or all of them, until Ctrl-C")
    run.add_argument("--role", choices=["plugin", "worker", "api", "worldstate", "all"], default="all",
                     help="plugin: enrich agent.skill.request; worker: store episodes; "
                          "api: memory service; worldstate: probes, goals, metrics (default: all)")
    run.add_argument("--demo", action="store_true", help="start the echo executor and play a short conversation")
    run.add_argument("--once", action="store_true", help="exit after the demo (implies --demo); exit code 0 if it worked")
    run.add_argument("--quiet", action="store_true", help="do not narrate what each component does")

    doc = sub.add_parser("doctor", help="check config, NATS and the store; say what is wrong")
    doc.add_argument("--smoke", action="store_true", help="also write, read back and delete a temporary group")

    from mnemobus.cli_extra import register_commands

    register_commands(sub)
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
        if args.command == "run":
            from mnemobus.app import run

            demo = args.demo or args.once
            return anyio.run(lambda: run(settings, args.role, demo=demo, once=args.once,
                                         echo=None if args.quiet else _say))
        if args.command == "doctor":
            from mnemobus.doctor import doctor

            return anyio.run(lambda: doctor(settings, smoke=args.smoke, say=_say))
        return int(args.handler(settings, args))
    except ConfigError as exc:
        print(f"mnemobus: configuration refused: {exc}", file=sys.stderr)
        return 2
    except MnemobusError as exc:
        print(f"mnemobus: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
