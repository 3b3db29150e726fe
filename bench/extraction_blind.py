"""A labelled file scored end to end, as a user's store would hold it: every turn through POST /messages.

Used by `make bench-extraction` for each bench/extraction_set/blind/*.yaml (the frozen blind set; BLIND_DIR names
another folder). The memory service of `mnemobus run` (bus, worker, API; SQLite store, the configured extractor)
runs in this process (bench_locomo_public.Service). Per item, in its own group:

1. `before` (turns said earlier, at `before_at`, default a day before the item) go in through POST /messages; once
   the worker stored them, the group's facts are read: what the extractor itself stored, never the gold's words.
2. The item's `turns` go in the same way.
3. Facts: the facts drawn from the item's turns and still held, scored against `facts` (precision, recall, recall
   per `tier`, consistency: the share of a `fact_id`'s phrasings where every gold fact was found).
4. Endings: facts held after step 1 that step 2 ended, plus past facts step 2 recorded ("I used to ..."), scored
   against `ends`; every other ending is collateral, `keeps` ended are counted apart, and a held fact the gold
   says ends whose confidence rose instead ("I'm no longer vegan" confirming "is vegan") counts in
   `ends_raised_confidence`.

Both steps run for all items at once (groups are independent), so the worker batches them as it would live traffic.
"""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from extraction_score import Item, Tally, Triple, load_items  # noqa: E402

WAIT_S = 600


def group_of(stem: str, item: Item) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"blind_{stem}_{item.id}")[:128]


def messages(turns: list[tuple[str, str]], start: Any, tag: str) -> list[dict[str, Any]]:
    return [{"uuid": f"{tag}-{n}", "role_type": "assistant" if name == "Assistant" else "user",
             "role": name, "content": text, "timestamp": (start + timedelta(minutes=n)).isoformat()}
            for n, (name, text) in enumerate(turns)]


async def post_all(svc: Any, batches: list[tuple[str, list[dict[str, Any]]]]) -> dict[str, list[str]]:
    """POST /messages per group; waits until the worker stored every episode; group -> episode uuids."""
    store = svc.rt.engine.store
    out: dict[str, list[str]] = {}
    expected: dict[str, int] = {}
    for group, msgs in batches:
        if not msgs:
            continue
        expected[group] = await store.count_episodes(group) + len(msgs)  # the group may hold earlier turns
        r = await svc.http.post("/messages", json={"group_id": group, "messages": msgs})
        r.raise_for_status()
        out[group] = r.json()["episode_uuids"]
    with anyio.fail_after(WAIT_S):
        for group, n in expected.items():
            while await store.count_episodes(group) < n:
                await anyio.sleep(0.05)
    return out


def triple(f: Any) -> Triple:
    return Triple(f.subject_name, f.relation, f.object_name)


async def score_file(svc: Any, path: Path) -> tuple[dict[str, float | int], list[str]]:
    """One labelled file end to end: its figures, and what was missed or wrong (never shown for the frozen set)."""
    items, tally = await tally_file(svc, path)
    return {"items": items, **tally.figures()}, tally.missed + tally.wrong


def is_changes(path: Path) -> bool:
    """A file of change scenarios (changes_*.yaml): the ones pooled into one endings figure."""
    return path.stem.startswith("changes")


def pooled_changes(tallies: list[tuple[Path, int, Tally]]) -> dict[str, float | int]:
    """The change files as one set: endings precision, recall and collateral over all their items (`changes_pooled`
    in the results); per-file figures of a few items each swing by a whole item."""
    mine = [(path.stem, tally) for path, _, tally in tallies if is_changes(path)]
    if not mine:
        return {}
    figures = Tally.pooled(mine).figures()
    return {"files": len(mine), "items": sum(n for path, n, _ in tallies if is_changes(path)), **figures}


async def tally_file(svc: Any, path: Path, stride: int = 1) -> tuple[int, Tally]:
    """One labelled file end to end (every `stride`-th item: a sample for a slow extractor): how many items, and
    their counts."""
    items = load_items(path)[::stride]
    store = svc.rt.engine.store
    groups = {item.id: group_of(path.stem, item) for item in items}
    await post_all(svc, [(groups[i.id], messages(i.before, i.before_at or i.at - timedelta(days=1), f"b{i.id}"))
                         for i in items])
    held: dict[str, dict[str, Any]] = {}
    for item in items:
        export = await store.export_group(groups[item.id])
        held[item.id] = {f.id: f for f, _ in export.facts if f.invalid_at is None}
    said = await post_all(svc, [(groups[i.id], messages(i.turns, i.at, f"t{i.id}")) for i in items])
    tally = Tally()
    for item in items:
        export = await store.export_group(groups[item.id])
        now = {f.id: f for f, _ in export.facts}
        mine = set(said.get(groups[item.id], []))
        drawn = [f for f in now.values() if set(f.episode_ids) & mine]  # new, confirmed, or ended by the turns
        tally.add_facts(item, [(triple(f), f.valid_at) for f in drawn if f.invalid_at is None])
        ended = [triple(now[k]) for k in held[item.id] if k in now and now[k].invalid_at is not None]
        ended += [triple(f) for f in drawn if f.invalid_at is not None and f.id not in held[item.id]]
        raised = [triple(now[k]) for k, f in held[item.id].items()
                  if k in now and now[k].invalid_at is None and now[k].confidence > f.confidence]
        tally.add_held_endings(item, ended, raised)
    return len(items), tally
