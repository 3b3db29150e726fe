"""The loop every file import shares: read a batch of lines, let the importer store it, checkpoint, show.

Lines are numbered from 1 as an editor numbers them, so a bad one can be found. What cannot be stored goes
to a dead-letter file (one JSON object a line: the line number, the reason, the detail, the text), cut back
on resume to its length at the checkpoint, so a batch read twice is never dead-lettered twice.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from mnemobus.graphio.checkpoint import Checkpoint
from mnemobus.graphio.progress import Counts, ProgressLine

#: bad lines told on stderr one by one; past this many, only the count (the dead-letter file has them all)
MAX_TOLD = 50


@dataclass(frozen=True, slots=True)
class Line:
    number: int
    data: bytes


class DeadLetters:
    """The lines an import could not store, with why; appended to `path`."""

    def __init__(self, path: Path, keep_bytes: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file: BinaryIO = path.open("ab")
        self.file.truncate(keep_bytes)
        self.file.seek(keep_bytes)
        self.told = 0

    def add(self, counts: Counts, line: Line, reason: str, detail: str, where: str | None = None) -> None:
        """Count, keep and tell one row that cannot be stored; `where` names it when a line number does not."""
        counts.dead_letter(reason)
        record = {"line": line.number, "reason": reason, "detail": detail,
                  "text": line.data[:4000].decode("utf-8", "replace")}
        self.file.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        self.told += 1
        if self.told <= MAX_TOLD:
            print(f"\n{where or f'line {line.number}'}: {reason}: {detail[:300]} (skipped)", file=sys.stderr)
        elif self.told == MAX_TOLD + 1:
            print(f"\nmore bad lines: see {self.path}", file=sys.stderr)

    def size(self) -> int:
        self.file.flush()
        return self.file.tell()

    def close(self) -> None:
        self.file.close()


#: stores one batch: counts what happened to each line, dead-letters what it cannot store; `state` is the
#: importer's own part of the checkpoint (restore keeps the export's header there)
Importer = Callable[[list[Line], Counts, DeadLetters, dict[str, Any]], Awaitable[None]]


async def import_file(source: Path, checkpoint: Checkpoint, dead_path: Path, importer: Importer, *, what: str,
                      batch_size: int, restart: bool = False, progress: ProgressLine | None = None) -> Counts:
    """Import `source` from its checkpoint (its first line when there is none, or on `restart`) to its end."""
    if restart:
        checkpoint.clear()
    saved = checkpoint.load() or {}
    offset, number = int(saved.get("offset", 0)), int(saved.get("line", 0))
    counts = Counts.of(saved["counts"]) if "counts" in saved else Counts()
    state: dict[str, Any] = dict(saved.get("state", {}))
    if saved:
        print(f"{what}: resuming at line {number + 1} from {checkpoint.path}", file=sys.stderr)
    shown = progress or ProgressLine(what, source.stat().st_size)
    dead = DeadLetters(dead_path, int(saved.get("dead_bytes", 0)) if saved else 0)
    try:
        with source.open("rb") as f:
            f.seek(offset)
            while True:
                batch: list[Line] = []
                while len(batch) < batch_size and (raw := f.readline()):
                    number += 1
                    if raw.strip():
                        batch.append(Line(number, raw.rstrip(b"\r\n")))
                if not batch:
                    break
                counts.read += len(batch)
                await importer(batch, counts, dead, state)
                checkpoint.save({"offset": f.tell(), "line": number, "counts": counts.state(),
                                 "dead_bytes": dead.size(), "state": state})
                shown.show(counts, f.tell())
        shown.show(counts, source.stat().st_size, force=True)
        shown.close()
        checkpoint.clear()
    finally:
        dead.close()
    if not counts.dead_lettered:
        dead_path.unlink(missing_ok=True)
    return counts
