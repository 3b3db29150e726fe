"""`mnemobus graph stats|refresh [--group G]`: a group's size and upkeep, and a community refresh on demand.

Both ask the running memory service (`memory.api.graph.stats|refresh`), like `mnemobus memory`: a refresh
then runs where the worker's refresher keeps its state, never beside it in a second process.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mnemobus.shared.config import Settings
from mnemobus.kernel import eventloop

STATS_COLUMNS = ("group_id", "entities", "active_facts", "ended_facts", "communities", "largest_community",
                 "last_refresh", "evicted")
REFRESH_COLUMNS = ("group_id", "finished", "edges", "communities", "changed", "unchanged", "summaries", "seconds")


def add_commands(cmds: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    stats = cmds.add_parser("stats", help="entities, active and ended facts, communities, the largest one, the last "
                                          "refresh and rows evicted, per group (asks the running service)")
    refresh = cmds.add_parser("refresh", help="refresh communities now (asks the running service)")
    for c, endpoint in ((stats, "graph.stats"), (refresh, "graph.refresh")):
        c.add_argument("--group", help="one group (default: every group)")
        c.add_argument("--json", action="store_true", help="the service's answer as JSON")
        c.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the service")
        c.set_defaults(handler=lambda settings, args, endpoint=endpoint: handle(settings, args, endpoint))


def table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    cells = [list(columns)] + [["-" if r.get(c) is None else str(r[c]) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def handle(settings: Settings, args: argparse.Namespace, endpoint: str) -> int:
    """0 with the table (or JSON) on stdout; 1 with the reason on stderr."""
    from mnemobus.cli.api_client import request_api

    body = json.dumps({"group_id": args.group} if args.group else {}).encode()
    try:
        reply = eventloop.run(lambda: request_api(settings, endpoint, body, args.timeout, "graph"), settings.event_loop)
    except Exception as exc:  # no server, timeout, refusal: say it, exit non-zero
        print(f"mnemobus graph: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(reply, indent=2))
    elif endpoint == "graph.stats":
        print(table(reply["groups"], STATS_COLUMNS))
    else:
        print(table(reply["refreshes"], REFRESH_COLUMNS))
    return 0
