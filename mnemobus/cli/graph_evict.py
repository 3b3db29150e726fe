"""`mnemobus graph evict [--group G] [--dry-run]`: eviction under the configured retention policy, now.

Opens the configured store directly, like `graph export`: the operator holds its files or credentials. The
rows removed are exactly those the worker's schedule would remove (`engine.retention.evict_groups`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from mnemobus.shared.config import Settings
from mnemobus.kernel import eventloop


async def evict(settings: Settings, args: argparse.Namespace) -> int:
    from mnemobus.kernel.backends import build_store
    from mnemobus.engine.embed import DIM
    from mnemobus.engine.retention import evict_groups, policy_of
    from mnemobus.shared.groups import validate_group_id

    store = build_store(settings, DIM)
    await store.open()
    try:
        groups = [validate_group_id(args.group)] if args.group else await store.group_ids()
        done = await evict_groups(store, groups, policy_of(settings.retention), now=datetime.now(UTC),
                                  dry_run=args.dry_run)
    finally:
        await store.close()
    verb = "would remove" if args.dry_run else "removed"
    for group, found in done.items():
        if not found.empty:
            print(f"{group}: {verb} {found.facts} fact(s), {found.entities} entit(ies)"
                  + (f"; history before {found.cutoff.isoformat()} incomplete" if found.cutoff and not args.dry_run
                     else ""))
    facts, entities = sum(e.facts for e in done.values()), sum(e.entities for e in done.values())
    print(f"{len(done)} group(s): {verb} {facts} fact(s), {entities} entit(ies)"
          + (" (dry run: nothing removed)" if args.dry_run else ""), file=sys.stderr)
    return 0


def add_evict_command(cmds: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    ev = cmds.add_parser("evict", help="evict what the retention policy says has outlived its use (docs/lifecycle.md)")
    ev.add_argument("--group", help="one group (default: every group)")
    ev.add_argument("--dry-run", action="store_true", help="count what would go, remove nothing")
    ev.set_defaults(handler=eventloop.command(evict))
