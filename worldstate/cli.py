"""`mnemobus status`: one poll of every domain, printed as the JSON document the API serves.

Exit code 0 when every goal is satisfied, 1 otherwise (violated or unknown),
so scripts and container health checks can use it directly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import anyio

from mnemobus.shared.config import Settings
from mnemobus.shared.errors import ConfigError
from worldstate.goals import load_config
from worldstate.poller import Poller
from worldstate.probes import ProbeContext


async def _status(settings: Settings, goals: Path | None) -> int:
    from mnemobus.kernel.app import open_runtime

    config = load_config(goals)
    async with open_runtime(settings) as rt:
        snap = await Poller(ProbeContext(rt.bus, rt.engine, rt.settings, rt.metrics, config)).poll_once()
    print(json.dumps(snap.document, indent=2, default=str))
    bad = [r for r in snap.results if not r.satisfied]
    for r in bad:
        print(f"{r.state}: {r.goal.id} ({r.goal.severity}): {r.reason}", file=sys.stderr)
    return 0 if not bad else 1


def run_status(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return anyio.run(_status, settings, args.goals)
    except ConfigError as exc:
        print(f"status: {exc}", file=sys.stderr)
        return 2


def add_status_command(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("status", help="poll the world state once; print it as JSON; exit 1 unless every goal holds")
    p.add_argument("--goals", type=Path, default=None,
                   help="goals file (default $MNEMOBUS_GOALS or workspace/goals.yaml)")
    p.set_defaults(handler=run_status)
