"""Inclusive share of py-spy samples per function, within the stacks that pass through a given frame.

Run: `.venv/bin/python bench/stacks.py RAW_FILE [--within FRAME_SUBSTRING] [--top N]` on the collapsed stacks
`py-spy record -f raw` writes; prints a table of functions by the share of samples they (or what they call)
were on the stack for. bench/profile_request.py's figures say how much CPU; this says where it went.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path


_LINE = re.compile(r":\d+\)$")


def inclusive(lines: list[str], within: str | None, by_function: bool = True) -> tuple[Counter[str], int]:
    """Samples per frame (counted once per stack however often it recurs), and the samples considered."""
    per: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_LINE.sub(")", f) for f in stack.split(";")] if by_function else stack.split(";")
        if within:
            cut = next((i for i, f in enumerate(frames) if within in f), None)
            if cut is None:
                continue
            frames = frames[cut:]
        n = int(count)
        total += n
        for frame in set(frames):
            per[frame] += n
    return per, total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("raw", type=Path)
    ap.add_argument("--within", default=None)
    ap.add_argument("--top", type=int, default=45)
    args = ap.parse_args()
    per, total = inclusive(args.raw.read_text().splitlines(), args.within)
    print(f"{total} samples{f' within {args.within!r}' if args.within else ''}")
    for frame, n in per.most_common(args.top):
        print(f"{100 * n / max(1, total):6.1f}%  {frame}")


if __name__ == "__main__":
    main()
