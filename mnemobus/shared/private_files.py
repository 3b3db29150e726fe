"""Files only their owner may read: passwords and URLs that carry them."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> Path:
    """Write `text` to `path` with mode 0600 from the first byte (the directory is created if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    path.chmod(0o600)  # an existing file keeps its old mode through O_CREAT
    return path
