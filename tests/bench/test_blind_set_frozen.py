"""The blind labelled set is evaluation data: frozen when written, never edited to suit the extractor."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

BLIND = Path(__file__).resolve().parents[2] / "bench" / "extraction_set" / "blind"


def _pinned() -> dict[str, str]:
    pins = {}
    for line in (BLIND / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        pins[name.strip()] = digest
    return pins


def test_every_blind_file_matches_its_pinned_digest() -> None:
    pins = _pinned()
    on_disk = {p.name for p in BLIND.glob("*.yaml")}
    assert on_disk == set(pins), f"files added or removed: {sorted(on_disk ^ set(pins))}"
    changed = [name for name, digest in pins.items()
               if hashlib.sha256((BLIND / name).read_bytes()).hexdigest() != digest]
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
