"""`mnemobus backfill [--group G] [--since T]`: draw stored episodes' facts again with the current extractor.

mnemobus/graphio/backfill.py says how (a shadow graph, then the difference applied); a checkpoint under the
data directory records the groups done, so a killed run goes on where it stopped, and a second run changes
nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mnemobus.cli.graph import aware_time
from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel import eventloop


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.kernel.backends import open_engine
    from mnemobus.graphio.backfill import backfill_group
    from mnemobus.graphio.checkpoint import Checkpoint, default_path
    from mnemobus.shared.groups import validate_group_id

    asked = sorted(validate_group_id(g) for g in args.group) if args.group else None
    key = f"groups={','.join(asked) if asked else '*'} since={args.since.isoformat() if args.since else '-'}"
    checkpoint = Checkpoint(args.checkpoint or default_path(settings.store.sqlite_path.parent, key, "backfill"), None)
    if args.restart:
        checkpoint.clear()
    state = checkpoint.load() or {"done": []}
    if state["done"]:
        print(f"backfill: resuming after {len(state['done'])} group(s) done ({checkpoint.path})", file=sys.stderr)
    engine = await open_engine(settings)
    try:
        groups = asked or sorted(await engine.store.group_ids())
        for group in groups:
            if group in state["done"]:
                continue
            counts = await backfill_group(engine, group, args.since)
            print(f"{group}: {counts.summary()}")
            state["done"].append(group)
            checkpoint.save(state)
    finally:
        await engine.close()
    checkpoint.clear()
    print(f"backfill: {len(groups)} group(s) done with the {engine.extractor.name} extractor")
    return 0


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("backfill", help="re-extract stored episodes with the current extractor")
    p.add_argument("--group", action="append", help="a group to backfill (repeatable); default: every group")
    p.add_argument("--since", type=aware_time, help="only episodes said at or after this time (ISO, with offset)")
    p.add_argument("--checkpoint", type=Path, help="where the run records the groups done")
    p.add_argument("--restart", action="store_true", help="ignore a checkpoint and start again")
    p.set_defaults(handler=eventloop.command(_run))
