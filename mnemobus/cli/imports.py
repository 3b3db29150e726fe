"""`mnemobus import messages|jsonl FILE`: bring memory in, resumable, idempotent, with a closing count.

Both read the file in batches, store each batch, then checkpoint (under the data directory); a run killed
at any point (kill -9 included) resumes from its checkpoint when started again, and a second run of a
finished file stores nothing twice. docs/graphio.md documents both file formats.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel import eventloop


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.shared.errors import MnemobusError
    from mnemobus.graphio.checkpoint import Checkpoint, default_path
    from mnemobus.graphio.resumable import import_file

    source: Path = args.file
    if not source.is_file():
        raise MnemobusError(f"no file {source}")
    where = args.checkpoint or default_path(settings.store.sqlite_path.parent, source, args.import_kind)
    dead_path = where.with_suffix(".dead.jsonl")
    what = f"import {args.import_kind} {source.name}"
    if args.import_kind == "messages":
        from mnemobus.kernel.backends import open_engine
        from mnemobus.graphio.messages import MessagesImporter

        engine = await open_engine(settings)
        try:
            counts = await import_file(source, Checkpoint(where, source), dead_path,
                                       MessagesImporter(engine, settings.nats.max_message_bytes), what=what,
                                       batch_size=args.batch, restart=args.restart)
        finally:
            await engine.close()
    else:
        from mnemobus.kernel.backends import build_store
        from mnemobus.engine.embed import DIM
        from mnemobus.graphio.restore import RowsImporter

        store = build_store(settings, DIM)
        await store.open()
        try:
            counts = await import_file(source, Checkpoint(where, source), dead_path, RowsImporter(store),
                                       what=what, batch_size=args.batch, restart=args.restart)
        finally:
            await store.close()
    print(f"{what}: {counts.summary()}")
    if counts.dead_lettered:
        print(f"dead letters, with line numbers and reasons: {dead_path}", file=sys.stderr)
    return 0


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("import", help="bring memory in: a chat log, another mnemobus's jsonl export, or a Graphiti graph")
    kinds = p.add_subparsers(dest="import_kind", required=True, metavar="messages|jsonl|graphiti")
    messages = kinds.add_parser("messages", help="one message a line (group, speaker, role, time, text, id), "
                                "extracted as live episodes are")
    rows = kinds.add_parser("jsonl", help="the file `mnemobus graph export --format jsonl` wrote, rows as they were")
    for cmd, batch in ((messages, 256), (rows, 500)):
        cmd.add_argument("file", type=Path)
        cmd.add_argument("--batch", type=int, default=batch, help=f"lines stored per batch (default {batch})")
        cmd.add_argument("--checkpoint", type=Path, help="where the run records its progress "
                         "(default: <data dir>/imports/<kind>-<file>-<hash>.json)")
        cmd.add_argument("--restart", action="store_true", help="ignore a checkpoint and start at the first line")
        cmd.set_defaults(handler=eventloop.command(_run))
    graphiti = kinds.add_parser("graphiti", help="a Graphiti deployment's episodes, entities and edges, with their "
                                "valid and invalid times, read from its Neo4j")
    graphiti.add_argument("--uri", required=True, help="Graphiti's Neo4j, e.g. bolt://graphiti-db:7687")
    graphiti.add_argument("--user", help="Neo4j user (none: a server without authentication)")
    graphiti.add_argument("--password-env", default="NEO4J_PASSWORD",
                          help="the environment variable holding the password (default NEO4J_PASSWORD)")
    graphiti.add_argument("--group", action="append", help="a Graphiti group to import (repeatable); default: all")
    graphiti.add_argument("--checkpoint", type=Path, help="where the run records the groups done")
    graphiti.add_argument("--restart", action="store_true", help="ignore a checkpoint and start again")
    graphiti.set_defaults(handler=eventloop.command(_graphiti))


async def _graphiti(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.cli.import_graphiti import run

    return await run(settings, args)
