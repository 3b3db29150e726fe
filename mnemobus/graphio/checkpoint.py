"""Where a resumable run is: the byte after the last batch it committed, and its counts so far.

Written after the store commits a batch, atomically (a temporary file, fsync, rename), so a kill -9 at any
moment leaves either the old checkpoint or the new one. A checkpoint can only lag the store, never lead it:
the lines of a batch committed but not yet checkpointed are read again on resume and found already stored,
which the deterministic episode ids (and row ids) make harmless.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from mnemobus.shared.errors import MnemobusError

HEAD_BYTES = 64 * 1024


def fingerprint(path: Path) -> str:
    """The file's first 64 KiB, hashed: a checkpoint is refused for another file at the same path."""
    with path.open("rb") as f:
        return hashlib.sha256(f.read(HEAD_BYTES)).hexdigest()


class Checkpoint:
    def __init__(self, path: Path, source: Path | None) -> None:
        """`source`: the file the run reads (a checkpoint for another file is refused); None for a run over a
        store (backfill), which its arguments name instead (see `default_path`)."""
        self.path, self.source = path, source
        self.print = fingerprint(source) if source is not None else ""

    def load(self) -> dict[str, Any] | None:
        """The saved state, None when there is none; refused when it belongs to another file."""
        try:
            state: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise MnemobusError(f"checkpoint {self.path} cannot be read ({exc}); delete it or pass --restart") from exc
        if state.get("fingerprint") != self.print:
            raise MnemobusError(f"checkpoint {self.path} was written for another file than {self.source}; "
                                "pass --restart to start this one from its first line")
        return state

    def save(self, state: dict[str, Any]) -> None:
        body = json.dumps({**state, "source": str(self.source), "fingerprint": self.print})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def clear(self) -> None:
        """The run finished: a next run reads the file again from its start (and stores nothing twice)."""
        self.path.unlink(missing_ok=True)


def default_path(data_dir: Path, source: Path | str, kind: str) -> Path:
    """One checkpoint per imported file (or per set of arguments) and kind, under the data directory."""
    key = hashlib.sha256(str(source.resolve() if isinstance(source, Path) else source).encode()).hexdigest()[:12]
    name = source.name if isinstance(source, Path) else "run"
    return data_dir / "imports" / f"{kind}-{name}-{key}.json"
