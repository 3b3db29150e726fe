"""The blind sets are evaluation data: frozen when written, never edited to suit the extractor or recall."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "bench"
BLIND = BENCH / "extraction_set" / "blind"
#: each blind set's folder and the pattern of its data files
SETS = {"extraction": (BLIND, "*.yaml"), "recall": (BENCH / "recall_set" / "blind", "*.json")}


def _pinned(folder: Path) -> dict[str, str]:
    pins = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        pins[name.strip()] = digest
    return pins


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_blind_file_matches_its_pinned_digest(name: str) -> None:
    folder, pattern = SETS[name]
    pins = _pinned(folder)
    on_disk = {p.name for p in folder.glob(pattern)}
    assert on_disk == set(pins), f"files added or removed: {sorted(on_disk ^ set(pins))}"
    changed = [name for name, digest in pins.items()
               if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest]
    assert changed == [], f"blind files edited after freezing: {changed}"


def test_every_fact_and_change_comes_in_all_three_phrasing_tiers() -> None:
    tiers: dict[str, set[str]] = {}
    for path in BLIND.glob("*.yaml"):
        for item in yaml.safe_load(path.read_text())["items"]:
            if "fact_id" in item:
                tiers.setdefault(item["fact_id"], set()).add(item["tier"])
    assert len(tiers) >= 100
    incomplete = {fid: t for fid, t in tiers.items() if t != {"plain", "reworded", "idiomatic"}}
    assert incomplete == {}


def test_every_blind_recall_question_has_its_evidence_among_its_conversations_turns() -> None:
    from bench.bench_locomo import load_conversations

    folder, _ = SETS["recall"]
    convs = load_conversations(folder / "blind_recall.json")
    assert [c["skipped"] for c in convs] == [0, 0, 0]
    assert sum(len(c["questions"]) for c in convs) == 350
