"""Whose turns a LoCoMo question's evidence is: the person the question names, or the other speaker (issue 37).

Run: `.venv/bin/python bench/locomo_speakers.py [PATH]` (default: the LoCoMo dev file). Per conversation and
category: evidence turns said by the one speaker the question names, evidence turns said by the other speaker, and
the questions naming neither or both. Why it matters: every graph signal tried starts from the question's entities,
and a person's turns are the turns that person said; if the categories split on whose turns the evidence is, any
signal that favours the named person's turns gains on some categories exactly what it loses on others, whatever
form the walk takes (docs/graph-recall.md, "Whose turns the evidence is"). No store, no model: the dataset only.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import CATEGORIES, DEFAULT_PATH, normalise_evidence  # noqa: E402


def speaker_split(sample: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Per category name: `named` (evidence turns said by the only speaker the question names, by first name),
    `other` (said by the other speaker) and `unnamed` (questions naming no speaker or both)."""
    conv = sample["conversation"]
    speakers = {conv["speaker_a"], conv["speaker_b"]}
    said_by = {turn["dia_id"]: turn["speaker"] for key, turns in conv.items()
               if re.fullmatch(r"session_\d+", key) for turn in turns}
    out: dict[str, dict[str, int]] = {}
    for qa in sample["qa"]:
        counts = out.setdefault(CATEGORIES[qa["category"]], {"named": 0, "other": 0, "unnamed": 0})
        # by first name, as the questions say them ("Maren" for the speaker "Maren Okafor")
        named = [s for s in speakers if re.search(rf"\b{re.escape(s.split()[0])}\b", qa["question"])]
        if len(named) != 1:
            counts["unnamed"] += 1
            continue
        for dia in normalise_evidence(qa["evidence"], set(said_by)):
            counts["named" if said_by[dia] == named[0] else "other"] += 1
    return out


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PATH
    print(f"{'conversation':14} {'category':12} {'named':>6} {'other':>6} {'share named':>12} {'unnamed q':>10}")
    for n, sample in enumerate(json.loads(path.read_text())):
        for category, c in sorted(speaker_split(sample).items()):
            share = c["named"] / max(1, c["named"] + c["other"])
            print(f"{sample.get('sample_id', n)!s:14} {category:12} {c['named']:6} {c['other']:6} {share:12.2f} "
                  f"{c['unnamed']:10}")


if __name__ == "__main__":
    main()
