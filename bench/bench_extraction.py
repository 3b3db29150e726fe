"""Extraction quality and speed on the labelled set (bench/extraction_set): precision and recall of facts and of
endings, per extractor and per part of the set, episodes/s, peak RSS.

Run: `make bench-extraction` (QUICK=1: a smaller speed run; the quality figures are always on the whole set).

- Facts: every item's turns are episodes (speaker = the turn's name, `Assistant` = the assistant role, reference
  time = the item's, a minute apart); each extractor's facts are scored against the item's gold facts
  (bench/extraction_score.py: subject, relation meaning, object, leniently). "sentences_with_facts_found" is the
  share of fact-bearing items where at least one gold fact was found.
- Endings go through the engine: the item's `holds` are stored first (ten years before), then the turns are ingested
  with the extractor (SQLite store, hashing embedder); every fact of the group that ended (held facts ended, past
  facts recorded) is scored against the item's `ends`. A held fact ended that the gold keeps is a collateral ending.
- Speed: the set's episodes repeated to N (2000; QUICK 400), extracted in batches of 64 (the worker's batch);
  episodes/s = N / wall time, on the cores the machine has (the parser itself runs on one).
- Baseline in the same run: the regex rules extractor (`offline-rules`), the only extractor before issue 23.

- Blind files (bench/extraction_set/blind/*.yaml, or BLIND_DIR): each scored end to end through POST /messages
  by bench/extraction_blind.py with the product's configured extractor: facts, recall per phrasing tier,
  consistency, endings of what the extractor itself stored from the item's `before` turns, collateral.
  BLIND_ONLY=1 scores only them (no labelled parts, no speed run). The change files (changes_*.yaml) are also
  pooled into one set, `blind_changes_pooled_*`: endings precision, recall and collateral over all their items.

The LLM extractor is scored on this set by `make bench-llm` (it needs the model server; every 4th held-out item).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402
from extraction_score import Item, Tally, Triple, load_items  # noqa: E402

DATA = Path(__file__).resolve().parent / "extraction_set"
PARTS = ("report", "dev")
BATCH = 64


def _rules() -> Any:
    from mnemobus.engine.extract_rules import RulesExtractor

    return RulesExtractor()


def _parsed() -> Any:
    from mnemobus.engine.extract_parse import ParsedExtractor

    extractor = ParsedExtractor()
    extractor.warm()
    return extractor


# name -> factory; the first is the baseline
EXTRACTORS: dict[str, Callable[[], Any]] = {"offline-rules": _rules, "offline": _parsed}


def episodes_of(item: Item, group: str) -> list[Any]:
    from mnemobus.shared.groups import GroupId
    from mnemobus.store.model import Episode, episode_id_for

    out = []
    for n, (name, text) in enumerate(item.turns):
        role = "assistant" if name == "Assistant" else "user"
        msg = f"{item.id}-{n}"
        out.append(Episode(id=episode_id_for(group, msg, role), group_id=GroupId(group), content=text, role=role,
                           source_message_id=msg, reference_time=item.at + timedelta(minutes=n),
                           speaker=None if role == "assistant" else name))
    return out


async def extract_all(extractor: Any, episodes: list[Any]) -> list[Any]:
    from mnemobus.engine.extract import BatchExtractor

    out: list[Any] = []
    for i in range(0, len(episodes), BATCH):
        chunk = episodes[i : i + BATCH]
        if isinstance(extractor, BatchExtractor):
            out.extend(await extractor.extract_many(chunk))
        else:
            out.extend([await extractor.extract(ep) for ep in chunk])
    return out


def meaning() -> Any:
    """The semantic fallback of relation mapping as the product configures it by default (what ingest applies)."""
    from mnemobus.engine.embed import MODELS
    from mnemobus.kernel.backends import shared_meaning
    from mnemobus.shared.config import ExtractionSettings

    threshold = ExtractionSettings().relation_threshold
    return shared_meaning(next(iter(MODELS)), threshold).nearest if threshold is not None else None


async def score_facts(extractor: Any, items: list[Item], tally: Tally) -> None:
    """Each item's facts as ingest would store them (canonical relations, the semantic fallback), against its gold."""
    from mnemobus.engine.relations import canonical_extraction

    read_as = meaning()
    per_item = [episodes_of(item, f"x_{item.id}") for item in items]
    flat = [ep for eps in per_item for ep in eps]
    results = await extract_all(extractor, flat)
    pos = 0
    for item, eps in zip(items, per_item, strict=True):
        got = []
        for extraction in results[pos : pos + len(eps)]:
            if isinstance(extraction, Exception):
                raise extraction
            got += [(Triple(f.subject, f.relation, f.object), f.valid_from)
                    for f in canonical_extraction(extraction, read_as).facts]
        pos += len(eps)
        tally.add_facts(item, got)


async def score_endings(extractor: Any, items: list[Item], tally: Tally, root: Path) -> None:
    from mnemobus.engine import MemoryEngine
    from mnemobus.engine.embed import HashEmbedder
    from mnemobus.engine.extract import ExtractedEntity, ExtractedFact, Extraction
    from mnemobus.store.sqlite import SqliteStore

    class Holds:  # the item's held facts, stored as an extraction would have stored them
        name = "holds"

        def __init__(self) -> None:
            self.now: list[Triple] = []

        async def extract(self, episode: Any) -> Extraction:
            facts = tuple(ExtractedFact(t.subject, t.relation, t.object, "semantic",
                                        f"{t.subject} {t.relation.replace('_', ' ')} {t.object}") for t in self.now)
            names = {n for t in self.now for n in (t.subject, t.object)}
            return Extraction(tuple(ExtractedEntity(n) for n in sorted(names)), facts)

    holds = Holds()
    store = SqliteStore(root / f"endings-{extractor.name}.sqlite3", dim=HashEmbedder().dim)
    await store.open()
    seeding = MemoryEngine(store, holds, HashEmbedder())
    engine = MemoryEngine(store, extractor, HashEmbedder(), meaning=meaning())
    for item in items:
        group = f"x_{item.id}"
        eps = episodes_of(item, group)
        if item.holds:
            holds.now = item.holds
            seed = eps[0].__class__(id=f"seed-{item.id}", group_id=eps[0].group_id, content="(held facts)",
                                    role="user", source_message_id=f"seed-{item.id}",
                                    reference_time=item.at - timedelta(days=3650))
            await seeding.ingest(seed)
        for outcome in await engine.ingest_many(eps):
            if isinstance(outcome, Exception):
                raise outcome
        export = await store.export_group(eps[0].group_id)
        ended = [Triple(f.subject_name, f.relation, f.object_name) for f, _ in export.facts if f.invalid_at is not None]
        tally.add_endings(item, ended)
    await store.close()


async def speed(extractor: Any, items: list[Item], n: int) -> float:
    base = [ep for item in items for ep in episodes_of(item, f"s_{item.id}")]
    episodes = [base[i % len(base)] for i in range(n)]
    t = time.perf_counter()
    await extract_all(extractor, episodes)
    return n / (time.perf_counter() - t)


def blind_files() -> list[Path]:
    """The frozen blind set (bench/extraction_set/blind/*.yaml), or the files in BLIND_DIR."""
    folder = Path(os.environ.get("BLIND_DIR") or DATA / "blind")
    return sorted(folder.glob("*.yaml")) if folder.is_dir() else []


async def blind_figures(root: Path, sections: dict[str, Any] | None = None,
                        ready: Callable[[Any], None] | None = None, stride: int = 1) -> dict[str, Any]:
    """Each blind file end to end through POST /messages (bench/extraction_blind.py), as `blind_<file>_<figure>`;
    `sections` add config (another extractor), `ready(service)` runs once the service is up, `stride` samples
    every n-th item of each file."""
    files = blind_files()
    if not files:
        return {}
    from bench_locomo_public import Service
    from extraction_blind import pooled_changes, tally_file

    out: dict[str, Any] = {}
    tallies = []
    (root / "blind").mkdir(exist_ok=True)
    async with Service(root / "blind", {}, sections) as svc:
        if ready is not None:
            ready(svc)
        for path in files:
            items, tally = await tally_file(svc, path, stride)
            tallies.append((path, items, tally))
            for key, value in {"items": items, **tally.figures()}.items():
                out[f"blind_{path.stem}_{key}"] = value
            if os.environ.get("SHOW") == str(path):  # a fixture's misses; never name the frozen blind set here
                print("\n".join(tally.missed + tally.wrong))
    out.update({f"blind_changes_pooled_{key}": value for key, value in pooled_changes(tallies).items()})
    return out


async def main() -> None:
    parts = {part: load_items(DATA / f"{part}.yaml") for part in PARTS}
    n_speed = 400 if quick() else 2000
    figures: dict[str, Any] = {f"{part}_items": len(items) for part, items in parts.items()}
    misses: dict[str, list[str]] = {}
    show = os.environ.get("SHOW", "")  # SHOW=dev prints the dev part's misses and wrong facts (never the report's)
    only_blind = os.environ.get("BLIND_ONLY") == "1"
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        for name, factory in {} if only_blind else EXTRACTORS.items():
            rss0 = peak_rss_mb()
            t = time.perf_counter()
            extractor = factory()
            figures[f"{name}_load_s"] = round(time.perf_counter() - t, 2)
            for part, items in parts.items():
                tally = Tally()
                await score_facts(extractor, items, tally)
                await score_endings(extractor, items, tally, Path(tmp))
                for key, value in tally.figures().items():
                    figures[f"{name}_{part}_{key}"] = value
                if part == show:
                    misses[f"{name} {part}"] = tally.missed + tally.wrong
            load0 = os.getloadavg()[0]
            figures[f"{name}_episodes_per_s"] = round(await speed(extractor, parts["dev"] + parts["report"], n_speed), 1)
            figures[f"{name}_load"] = round((load0 + os.getloadavg()[0]) / 2, 2)
            figures[f"{name}_peak_rss_growth_mb"] = round(peak_rss_mb() - rss0, 1)
        figures.update(await blind_figures(Path(tmp)))
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("Extraction on the labelled set (report = held out)", figures)
    for key, lines in misses.items():
        print(f"\n{key}: missed and wrong")
        for line in lines:
            print(f"  {line}")
    write_results("bench_extraction_blind" if only_blind else "bench_extraction", figures, baseline="the regex rules extractor (offline-rules), same set, same run")


if __name__ == "__main__":
    asyncio.run(main())
