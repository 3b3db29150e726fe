"""`mnemobus import graphiti --uri bolt://... [--group G]`: a Graphiti deployment's graph into this store.

mnemobus/graphio/graphiti.py says what becomes what; mnemobus/cli/imports.py declares the arguments beside
the other kinds of import. A checkpoint lists the groups done; a group is written idempotently (Graphiti's
uuids are kept), so a killed run started again finishes what it was doing and stores nothing twice.
"""

from __future__ import annotations

import argparse
import os
import sys

from mnemobus.shared.config import Settings


async def run(settings: Settings, args: argparse.Namespace) -> int:
    from neo4j import AsyncGraphDatabase

    from mnemobus.kernel.backends import open_engine
    from mnemobus.graphio.checkpoint import Checkpoint, default_path
    from mnemobus.graphio.graphiti import import_graphiti
    from mnemobus.graphio.resumable import DeadLetters

    key = f"{args.uri} groups={','.join(sorted(args.group or ['*']))}"
    where = args.checkpoint or default_path(settings.store.sqlite_path.parent, key, "graphiti")
    checkpoint = Checkpoint(where, None)
    if args.restart:
        checkpoint.clear()
    saved = checkpoint.load() or {}
    if saved:
        print(f"import graphiti: resuming after {len(saved['done'])} group(s) done ({where})", file=sys.stderr)
    password = os.environ.get(args.password_env) if args.user else None
    auth = (args.user, password or "") if args.user else None
    driver = AsyncGraphDatabase.driver(args.uri, auth=auth, connection_timeout=10, connection_acquisition_timeout=30)
    dead_path = where.with_suffix(".dead.jsonl")
    dead = DeadLetters(dead_path, int(saved.get("dead_bytes", 0)))
    engine = await open_engine(settings)
    try:
        counts = await import_graphiti(driver, engine.store, engine.embedder, args.group, checkpoint, dead)
    finally:
        dead.close()
        await engine.close()
        await driver.close()
    print(f"import graphiti {args.uri}: {counts.summary()}")
    if counts.dead_lettered:
        print(f"dead letters, with their uuids and reasons: {dead_path}", file=sys.stderr)
    else:
        dead_path.unlink(missing_ok=True)
    return 0
