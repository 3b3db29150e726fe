"""The HTTP API under generated requests for minutes: how many answers were 5xx (the bar is 0).

Run: `make bench-http-fuzz` (FUZZ_SECONDS, default 300; QUICK=1 for 30). A whole `mnemobus run --role all`
in its own process (embedded nats-server, SQLite, hashing embedder), then schemathesis requests from its
/openapi.json, valid and invalid, operation after operation, round after round, until the time is spent.
Then it waits for the worker to settle every episode the API accepted and counts the dead letters: nothing
accepted at the door may be dead-lettered later for a reason the door could have seen (the bar is 0 too).
Writes bench/results/http_fuzz.json: requests, the answers by status class, the 5xx found (the first few
described in the output), dead letters by reason, operations, seconds, peak RSS of this process.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

import anyio  # noqa: E402

from mnemobus.shared import subjects  # noqa: E402
from mnemobus.bus.connection import Bus  # noqa: E402
from mnemobus.shared.config import NatsSettings  # noqa: E402
from mnemobus.shared.envelope import DeadLetter  # noqa: E402
from tests.blackbox.conftest import service_process  # noqa: E402
from tests.blackbox.fuzz import MODES, operations, server_errors  # noqa: E402

#: examples per operation and mode in one round: small, so every operation gets its turn early
ROUND_EXAMPLES = 25


def fuzz(url: str, seconds: float) -> tuple[Counter[int], list[str], int, int]:
    """(statuses, the 5xx described, rounds, operations): operation after operation, round after round."""
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    ops = operations(url)
    rounds, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        rounds += 1
        for op in ops:
            for mode in MODES:
                if time.monotonic() - started >= seconds:
                    break
                errors += server_errors(url, op, mode, ROUND_EXAMPLES, statuses)
    return statuses, errors, rounds, len(ops)


async def run(url: str, home: Path, seconds: float) -> dict[str, Any]:
    """The fuzz (in a thread), every dead letter heard as it is published (a fuzzed POST /clear purges the
    dead-letter stream, so it is not read afterwards), then the worker waited for until it settled."""
    bus = await Bus.connect((home / "nats" / "embedded-url").read_text().strip(), NatsSettings(),
                            name="bench-http-fuzz")  # the service's embedded bus, with its credentials
    reasons: Counter[str] = Counter()

    async def heard(msg: Any) -> None:
        reasons[DeadLetter.model_validate_json(msg.data).reason] += 1

    try:
        await bus.subscribe(f"{subjects.DLQ_PREFIX}.>", heard)
        started = time.monotonic()
        statuses, errors, rounds, ops = await anyio.to_thread.run_sync(fuzz, url, seconds)
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 180  # a failing episode is retried with backoff before its dead letter
        while True:
            info = await bus.js.consumer_info(subjects.EPISODE_STREAM, subjects.WORKER_DURABLE)
            unsettled = int(info.num_pending) + int(info.num_ack_pending)
            if unsettled == 0 or time.monotonic() > deadline:
                break
            await anyio.sleep(0.5)
        await bus.flush()
    finally:
        await bus.close()
    for e in errors[:10]:
        print("5xx:", e)
    by_class = Counter(f"{code // 100}xx" for code in statuses.elements())
    return {"seconds": round(elapsed, 1), "requests": sum(statuses.values()), "rounds": rounds, "operations": ops,
            "responses_2xx": by_class["2xx"], "responses_4xx": by_class["4xx"], "responses_5xx": by_class["5xx"],
            "dead_letters": sum(reasons.values()), "episodes_unsettled_at_end": unsettled,
            **{f"dead_letters_{reason}": n for reason, n in sorted(reasons.items())}}


def main() -> None:
    seconds = float(os.environ.get("FUZZ_SECONDS", "30" if quick() else "300"))
    with tempfile.TemporaryDirectory() as home, service_process(Path(home)) as url:
        figures = anyio.run(run, url, Path(home), seconds)
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table(f"HTTP API under generated requests for {figures['seconds']:.0f} s", figures)
    write_results("http_fuzz", figures, "none: pass/fail figures, responses_5xx and dead_letters must be 0")


if __name__ == "__main__":
    main()
