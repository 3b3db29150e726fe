"""`mnemobus dlq list|replay|purge`."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

from mnemobus.shared import subjects
from mnemobus.bus import dlq
from mnemobus.bus.connection import Bus
from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel import eventloop


@contextlib.asynccontextmanager
async def _bus(settings: Settings) -> AsyncIterator[Bus]:
    from mnemobus.kernel.app import nats_url

    async with nats_url(settings) as (url, _server, nats_settings):
        bus = await Bus.connect(url, nats_settings, name="mnemobus-dlq")
        try:
            await bus.ensure_streams()
            yield bus
        finally:
            await bus.close()


def _refusal(subject: str, data: bytes, settings: Settings) -> str | None:
    """Why the worker would dead-letter this episode again (its own parse and checks), or None; a letter that is
    not an episode is replayed as it is."""
    from mnemobus.shared.envelope import EpisodeMessage
    from mnemobus.shared.errors import InvalidMessage
    from mnemobus.kernel.worker import parse_message, to_episode

    if not subject.startswith(subjects.EPISODE_PREFIX + "."):
        return None
    try:
        to_episode(parse_message(EpisodeMessage, data, settings.nats.max_message_bytes), subject)  # type: ignore[arg-type]
    except InvalidMessage as exc:
        return f"{exc.reason}: {exc.detail}"
    return None


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    async with _bus(settings) as bus:
        if args.action == "list":
            letters = await dlq.list_letters(bus, args.group, args.limit)
            for item in letters:
                lt = item.letter
                print(f"#{item.seq} {item.subject} reason={lt.reason} attempts={lt.attempts} "
                      f"from={lt.original_subject} at={lt.at.isoformat()}\n    {lt.error[:200]}")
            total = await dlq.count_letters(bus, args.group)
            print(f"{len(letters)} of {total} dead letter(s) shown" + (f" (--limit {args.limit})"
                                                                         if len(letters) < total else ""))
        elif args.action == "replay":
            report = await dlq.replay(bus, args.group, lambda subject, data: _refusal(subject, data, settings))
            print(f"replayed {report.replayed} dead letter(s); skipped {report.truncated} truncated one(s); "
                  f"kept {len(report.kept)} that would be dead-lettered again")
            for item, why in report.kept:
                print(f"  kept #{item.seq} {item.letter.original_subject}: {why}")
        elif args.action == "purge":
            if not args.yes:
                print("refusing to purge without --yes")
                return 2
            print(f"purged {await dlq.purge(bus, args.group)} dead letter(s)")
    return 0


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("dlq", help="list, replay or purge dead letters (memory.dlq.<group>)")
    p.add_argument("action", choices=["list", "replay", "purge"])
    p.add_argument("--group", help="only this group's dead letters")
    p.add_argument("--limit", type=int, default=100, help="list at most this many (default 100)")
    p.add_argument("--yes", action="store_true", help="confirm purge")
    p.set_defaults(handler=eventloop.command(_run))
