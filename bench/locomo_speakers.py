"""Whose turns a LoCoMo question's evidence is: the person the question names, or the other speaker (issue 37).

Run: `.venv/bin/python bench/locomo_speakers.py [split|prior] [PATH]` (default: split, the LoCoMo dev file).
`split`, per conversation and category: evidence turns said by the one speaker the question names, evidence turns
said by the other speaker, and the questions naming neither or both. `prior`: the strongest simple baseline (SQLite
FTS5 + the turns-around step) with the named speaker's turns' scores multiplied by a factor, the factor and the
step's two weights tuned on one conversation and recall@10 reported on the other, both folds, beside the same
baseline without the factor tuned the same way: what a "the named person's turns first" signal is worth. Why it
matters: every graph signal tried starts from the question's entities, and a person's turns are the turns that
person said; if the categories split on whose turns the evidence is, any signal that favours the named person's
turns gains on some categories exactly what it loses on others, whatever form the walk takes (docs/graph-recall.md,
"Whose turns the evidence is"). No store, no model: the dataset only.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_locomo import (CATEGORIES, DEFAULT_PATH, fts_hits, fts_turns, load_conversations,  # noqa: E402
                          normalise_evidence, per_category, recall_at_k)
from bench_locomo_public import GRID, turns_around  # noqa: E402

FACTORS = (1.0, 1.1, 1.25, 1.5, 2.0)


def named_speaker(question: str, speakers: list[str]) -> str | None:
    """The one speaker the question names by first name ("Maren" for "Maren Okafor"); None for neither or both."""
    named = [s for s in speakers if re.search(rf"\b{re.escape(s.split()[0])}\b", question)]
    return named[0] if len(named) == 1 else None


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
        named = named_speaker(qa["question"], sorted(speakers))
        if named is None:
            counts["unnamed"] += 1
            continue
        for dia in normalise_evidence(qa["evidence"], set(said_by)):
            counts["named" if said_by[dia] == named else "other"] += 1
    return out


def prior_scores(conv: dict, speakers: list[str], factor: float, before: float, after: float) -> dict[str, float]:
    """Recall@10 per category of FTS5 (depth 50) with the named speaker's turns' scores times `factor`, then the
    turns-around step (`before`, `after`)."""
    ids = [t[0] for t in conv["turns"]]
    said_by = {t[0]: t[1].split(":", 1)[0] for t in conv["turns"]}  # turn_text: "Speaker: words"
    db = fts_turns([t[1] for t in conv["turns"]])
    rows = []
    for question, category, evidence in conv["questions"]:
        hits = fts_hits(db, question, 50)
        named = named_speaker(question, speakers)
        ranked = sorted(((ids[r], s * (factor if said_by[ids[r]] == named else 1.0)) for r, s in hits),
                        key=lambda hit: -hit[1])
        rows.append((category, recall_at_k(turns_around(conv, ranked, before, after), evidence, 10)))
    return per_category(rows)


def prior_folds(path: Path) -> None:
    convs = load_conversations(path)
    speakers = [[s["conversation"]["speaker_a"], s["conversation"]["speaker_b"]] for s in json.loads(path.read_text())]
    settings = list(itertools.product(FACTORS, GRID["context_before"], GRID["context_after"]))
    table = [{st: prior_scores(c, sp, *st) for st in settings} for c, sp in zip(convs, speakers, strict=True)]
    for tune, report in ((0, 1), (1, 0)):
        for name, allowed in (("FTS5 + turns-around", (1.0,)), ("... + named speaker's turns", FACTORS)):
            pick = max((st for st in settings if st[0] in allowed), key=lambda st: table[tune][st]["overall"])
            got = table[report][pick]
            print(f"report conv {report} | {name:28} (tuned on conv {tune}: factor {pick[0]}, before {pick[1]}, "
                  f"after {pick[2]}; {table[tune][pick]['overall']:.3f} there) | "
                  + "  ".join(f"{k} {v:.3f}" for k, v in got.items()))


def main() -> None:
    args = sys.argv[1:]
    what = args.pop(0) if args and args[0] in ("split", "prior") else "split"
    path = Path(args[0]) if args else DEFAULT_PATH
    if what == "prior":
        prior_folds(path)
        return
    print(f"{'conversation':14} {'category':12} {'named':>6} {'other':>6} {'share named':>12} {'unnamed q':>10}")
    for n, sample in enumerate(json.loads(path.read_text())):
        for category, c in sorted(speaker_split(sample).items()):
            share = c["named"] / max(1, c["named"] + c["other"])
            print(f"{sample.get('sample_id', n)!s:14} {category:12} {c['named']:6} {c['other']:6} {share:12.2f} "
                  f"{c['unnamed']:10}")


if __name__ == "__main__":
    main()
