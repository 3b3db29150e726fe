"""What a long import or backfill shows while it runs and says when it ends.

A line with what was read, stored, skipped and dead-lettered, the rate and the time left (from the bytes
still to read, which a file knows before it is read); redrawn in place on a terminal, one line every few
seconds in a log. The counts survive a restart inside the checkpoint, so the closing count covers the whole
file however many runs it took.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from typing import Any, TextIO


@dataclass
class Counts:
    read: int = 0  # lines (or rows) read
    stored: int = 0  # new in the store
    skipped: int = 0  # already stored: a replay, stored nothing twice
    dead: dict[str, int] = field(default_factory=dict)  # reason -> how many could not be stored

    @property
    def dead_lettered(self) -> int:
        return sum(self.dead.values())

    def dead_letter(self, reason: str) -> None:
        self.dead[reason] = self.dead.get(reason, 0) + 1

    def state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, state: dict[str, Any]) -> Counts:
        return cls(int(state["read"]), int(state["stored"]), int(state["skipped"]),
                   {str(k): int(v) for k, v in state["dead"].items()})

    def summary(self) -> str:
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(self.dead.items()))
        return (f"read {self.read}, stored {self.stored}, skipped {self.skipped} (already stored), "
                f"dead-lettered {self.dead_lettered}" + (f" ({why})" if why else ""))


def clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class ProgressLine:
    """Redraws `what: counts, rate, percent, ETA` at most every `every_s` (a new line each time off a terminal)."""

    def __init__(self, what: str, total_bytes: int, *, out: TextIO | None = None, every_s: float | None = None,
                 describe: Callable[[Counts], str] | None = None) -> None:
        """`total_bytes`: how far `show`'s position goes (bytes of a file, or items); `describe` words the counts."""
        self.what, self.total = what, max(total_bytes, 1)
        self.describe = describe or (lambda c: f"{c.read} read, {c.stored} stored, {c.skipped} skipped, "
                                               f"{c.dead_lettered} dead-lettered")
        self.out = out or sys.stderr
        self.tty = self.out.isatty()
        self.every_s = every_s if every_s is not None else (0.25 if self.tty else 5.0)
        self.started = time.monotonic()
        self.first_byte: int | None = None
        self.first_read = 0
        self.last = 0.0

    def rate(self, counts: Counts) -> float:
        """Lines a second in this run (a resumed run counts from where it resumed)."""
        elapsed = time.monotonic() - self.started
        return (counts.read - self.first_read) / elapsed if elapsed > 0 else 0.0

    def show(self, counts: Counts, at_byte: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.first_byte is None:
            self.first_byte, self.first_read = at_byte, counts.read
        if not force and now - self.last < self.every_s:
            return
        self.last = now
        elapsed = now - self.started
        done_bytes = at_byte - self.first_byte
        eta = (self.total - at_byte) * elapsed / done_bytes if done_bytes > 0 else None
        line = (f"{self.what}: {self.describe(counts)} | {self.rate(counts):.0f}/s | {100 * at_byte / self.total:.0f}%"
                f" | ETA {clock(eta) if eta is not None else '?'}")
        self.out.write(f"\r{line}\x1b[K" if self.tty else f"{line}\n")
        self.out.flush()

    def close(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()
