"""`mnemobus migrate`: copy groups between the embedded store and Neo4j, counts checked."""

from __future__ import annotations

import argparse

from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.shared.groups import validate_group_id
from mnemobus.kernel import eventloop


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.kernel.backends import build_store
    from mnemobus.kernel.migrate import migrate, text_progress

    dim = 384
    sqlite_settings = settings.model_copy(update={"store": settings.store.model_copy(update={"backend": "sqlite"})})
    neo_settings = settings.model_copy(update={"store": settings.store.model_copy(update={"backend": "neo4j"})})
    stores = {"sqlite": build_store(sqlite_settings, dim), "neo4j": build_store(neo_settings, dim)}
    src, dst = stores[args.source], stores[args.target]
    groups = [validate_group_id(g) for g in args.group] if args.group else None
    await src.open()
    await dst.open()
    try:
        results = await migrate(src, dst, groups, progress=text_progress)
    finally:
        await src.close()
        await dst.close()
    for r in results:
        print(f"{r.group_id}: {r.episodes} episode(s), {r.entities} entities, {r.facts} facts — counts match")
    print(f"migrated {len(results)} group(s) from {args.source} to {args.target}")
    return 0


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("migrate", help="copy groups between the embedded store and Neo4j (counts checked)")
    p.add_argument("--from", dest="source", choices=["sqlite", "neo4j"], default="sqlite")
    p.add_argument("--to", dest="target", choices=["sqlite", "neo4j"], default="neo4j")
    p.add_argument("--group", action="append", help="a group to copy (repeatable); default: every group")
    p.set_defaults(handler=eventloop.command(_run))
