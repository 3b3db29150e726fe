"""`mnemobus graph export <group> --format jsonl|graphml|mermaid|html`: a group as a file.

Reads the configured store directly (like `mnemobus migrate`): an operator who holds the store's files or
credentials may read it; a caller of a running service uses `GET /graph/{group_id}` instead, behind the
API key.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from mnemobus.cli.graph_evict import add_evict_command
from mnemobus.cli.graph_upkeep import add_commands as add_upkeep_commands
from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel import eventloop

FORMATS = ("jsonl", "graphml", "mermaid", "html")


def write_text(lines: Iterable[str], out: Path | None) -> None:
    """To stdout, or to `out` whole or not at all (a temporary file renamed when complete)."""
    if out is None:
        sys.stdout.writelines(lines)
        sys.stdout.flush()
        return
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.writelines(lines)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


async def export(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.kernel.backends import build_store
    from mnemobus.engine.embed import DIM
    from mnemobus.shared.errors import MnemobusError
    from mnemobus.graphio.export import graphml_lines, jsonl_lines, mermaid_lines
    from mnemobus.graphio.page import page_html
    from mnemobus.shared.groups import validate_group_id

    group = validate_group_id(args.group)
    store = build_store(settings, DIM)
    await store.open()
    try:
        dump = await store.export_group(group)
    finally:
        await store.close()
    if not (dump.episodes or dump.entities or dump.facts):
        raise MnemobusError(f"group {group!r} holds nothing in the {settings.store.backend} store")
    lines = {"jsonl": lambda: jsonl_lines(dump), "graphml": lambda: graphml_lines(dump, args.as_of),
             "mermaid": lambda: mermaid_lines(dump, args.as_of),
             "html": lambda: [page_html(dump)]}[args.format]()
    write_text(lines, args.out)
    if args.out is not None:
        print(f"{group}: {len(dump.episodes)} episode(s), {len(dump.entities)} entities, {len(dump.facts)} facts"
              f" -> {args.out} ({args.format})", file=sys.stderr)
    return 0


def aware_time(text: str) -> datetime:
    """An ISO time from the command line, refused without its UTC offset (a store compares times as UTC)."""
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no UTC offset (write e.g. 2026-01-31T00:00:00+00:00)")
    return value


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("graph", help="a group's graph as jsonl, GraphML, Mermaid or one HTML page; its stats; "
                                               "a community refresh")
    cmds = p.add_subparsers(dest="graph_command", required=True, metavar="export|stats|refresh|evict")
    ex = cmds.add_parser("export", help="write one group in a format (stdout unless --out)")
    ex.add_argument("group", help="the group id, e.g. user_josh")
    ex.add_argument("--format", choices=FORMATS, default="jsonl",
                    help="jsonl: every episode, entity and fact, enough to rebuild the group (mnemobus import "
                         "jsonl); graphml: entities and facts for graph tools; mermaid: the active facts; html: the "
                         "page GET /graph/{group_id} serves, one file that works offline")
    ex.add_argument("--out", type=Path, help="file to write (default: stdout)")
    ex.add_argument("--as-of", type=aware_time, help="graphml/mermaid: which facts count as active (default: now)")
    ex.set_defaults(handler=eventloop.command(export))
    add_evict_command(cmds)
    add_upkeep_commands(cmds)


def standalone_parser() -> argparse.ArgumentParser:
    """The `graph` command alone, for tests and for embedding in another CLI."""
    parser = argparse.ArgumentParser(prog="mnemobus")
    mnemobus_commands(parser.add_subparsers(dest="command", required=True))
    return parser
