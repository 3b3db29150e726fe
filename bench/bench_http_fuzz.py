"""The HTTP API under generated requests for minutes: how many answers were 5xx (the bar is 0).

Run: `make bench-http-fuzz` (FUZZ_SECONDS, default 300; QUICK=1 for 30). A whole `mnemobus run --role all`
in its own process (embedded nats-server, SQLite, hashing embedder), then schemathesis requests from its
/openapi.json, valid and invalid, operation after operation, round after round, until the time is spent.
Writes bench/results/http_fuzz.json: requests, the answers by status class, the 5xx found (the first few
described in the output), operations, seconds, peak RSS of this process.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

from tests.blackbox.conftest import service_process  # noqa: E402
from tests.blackbox.fuzz import MODES, operations, server_errors  # noqa: E402

#: examples per operation and mode in one round: small, so every operation gets its turn early
ROUND_EXAMPLES = 25


def main() -> None:
    seconds = float(os.environ.get("FUZZ_SECONDS", "30" if quick() else "300"))
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    rounds = 0
    with tempfile.TemporaryDirectory() as home, service_process(Path(home)) as url:
        ops = operations(url)
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            rounds += 1
            for op in ops:
                for mode in MODES:
                    if time.monotonic() - started >= seconds:
                        break
                    errors += server_errors(url, op, mode, ROUND_EXAMPLES, statuses)
        elapsed = time.monotonic() - started
    by_class = Counter(f"{code // 100}xx" for code in statuses.elements())
    figures = {"seconds": round(elapsed, 1), "requests": sum(statuses.values()), "rounds": rounds,
               "operations": len(ops), "responses_2xx": by_class["2xx"], "responses_4xx": by_class["4xx"],
               "responses_5xx": by_class["5xx"], "peak_rss_mb": round(peak_rss_mb(), 1)}
    print_table(f"HTTP API under generated requests for {elapsed:.0f} s", figures)
    for e in errors[:10]:
        print("5xx:", e)
    write_results("http_fuzz", figures, "none: a pass/fail figure, responses_5xx must be 0")


if __name__ == "__main__":
    main()
