"""Bringing memory in and seeing it: import speed, and the graph page at 5,000 entities.

Run: `make bench-import` (or `.venv/bin/python bench/bench_import.py`); QUICK=1 for a small run.

1. `mnemobus import messages`: N chat messages (bench_ingest's corpus, 20 users) written as a messages file
   and imported in process by the command's own code (`import_file` + `MessagesImporter`: parse, the worker's
   checks, `ingest_many` in batches of 256, a checkpoint after each) into a fresh SQLite store, offline
   extractor, hashing embedder (the static one embeds ~43,000 sentences/s, so it moves this little).
   Baseline, same run: the same episodes straight into `MemoryEngine.ingest_many`, same batches, fresh store
   (the floor; the difference is what the import's parsing, checks and checkpoints cost). Bar: >= 200/s.
2. The page at 5,000 entities (a hub of 2,500 neighbours, a second ring of 2,000, 500 in small pairs; 6,000
   facts, a tenth ended, each from its own turn): bytes, server time to lay out and render, and in headless
   Chromium (fresh profile, file://) the time from navigation start until the page is interactive (its script
   has drawn everything and answers: `dataset.ready`), then the time from a click on the hub until its facts
   are listed. Baseline, same run: the 8-entity page of the tests. Bar: interactive <= 2 s.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import corpus  # noqa: E402
from common import peak_rss_mb, print_table, quick, write_results  # noqa: E402

from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.embedders import make_embedder  # noqa: E402
from mnemobus.graphio.checkpoint import Checkpoint  # noqa: E402
from mnemobus.graphio.messages import MessagesImporter  # noqa: E402
from mnemobus.graphio.page import page_html  # noqa: E402
from mnemobus.graphio.progress import ProgressLine  # noqa: E402
from mnemobus.graphio.resumable import import_file  # noqa: E402
from mnemobus.kernel.headless import Browser  # noqa: E402
from mnemobus.store.model import Entity, Episode, Fact, GroupExport, IngestOutcome  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

BATCH = 256
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def message_line(ep: Episode) -> str:
    return json.dumps({"group": ep.group_id, "speaker": "Sam", "role": ep.role, "time": ep.reference_time.isoformat(),
                       "text": ep.content, "id": ep.source_message_id}) + "\n"


async def warm(engine: MemoryEngine) -> None:
    """Both runs start with the parser loaded and warm: 64 episodes of another corpus first."""
    await engine.ingest_many(corpus(64, 4, "warm", seed=1))


async def import_rate(root: Path, episodes: list[Episode]) -> tuple[float, str]:
    source = root / "messages.jsonl"
    source.write_text("".join(message_line(ep) for ep in episodes))
    store = SqliteStore(root / "import.sqlite3")
    await store.open()
    engine = MemoryEngine(store, embedder=make_embedder("hash", "", None))
    await warm(engine)
    try:
        with open("/dev/null", "w") as quiet:
            t = time.perf_counter()
            counts = await import_file(source, Checkpoint(root / "ck.json", source), root / "dead.jsonl",
                                       MessagesImporter(engine, 1 << 20), what="bench", batch_size=BATCH,
                                       progress=ProgressLine("bench", source.stat().st_size, out=quiet))
            rate = len(episodes) / (time.perf_counter() - t)
    finally:
        await engine.close()
    return rate, counts.summary()


async def ingest_rate(root: Path, episodes: list[Episode]) -> float:
    store = SqliteStore(root / "floor.sqlite3")
    await store.open()
    engine = MemoryEngine(store, embedder=make_embedder("hash", "", None))
    await warm(engine)
    try:
        t = time.perf_counter()
        for i in range(0, len(episodes), BATCH):
            for outcome in await engine.ingest_many(episodes[i : i + BATCH]):
                if not isinstance(outcome, IngestOutcome) or not outcome.created:
                    raise RuntimeError(f"an episode was not stored: {outcome!r}")
        return len(episodes) / (time.perf_counter() - t)
    finally:
        await engine.close()


def big_group(n_entities: int = 5000, seed: int = 3) -> GroupExport:
    """A hub, a ring of neighbours, a second ring beyond them, small pairs; facts from their own turns."""
    rnd = random.Random(seed)
    g = "bench_page"
    ents = [Entity(id=f"e{i}", group_id=g, name=f"Entity {i}" if i else "Sam", canonical_name=f"entity {i}",
                   type=rnd.choice(["person", "place", "organization", "thing"]),
                   first_seen=T0 + timedelta(hours=i)) for i in range(n_entities)]
    pairs = [(0, i) for i in range(1, n_entities // 2)]
    pairs += [(rnd.randrange(1, n_entities // 2), i) for i in range(n_entities // 2, n_entities * 9 // 10)]
    pairs += [(i, i + 1) for i in range(n_entities * 9 // 10, n_entities - 1, 2)]
    while len(pairs) < n_entities * 6 // 5:
        pairs.append((0, rnd.randrange(1, n_entities)))
    facts, eps = [], []
    for k, (a, b) in enumerate(pairs):
        when = T0 + timedelta(hours=max(a, b), minutes=k % 60)
        ep = Episode(id=f"p{k}", group_id=g, content=f"{ents[a].name} said something about {ents[b].name}, "
                     "a sentence of ordinary chat length with a little more to it.", role="user",
                     source_message_id=f"m{k}", reference_time=when, speaker="Sam")
        eps.append((ep, False, None))
        ended = when + timedelta(days=30) if k % 10 == 0 else None
        facts.append((Fact(id=f"f{k}", group_id=g, subject_id=ents[a].id, object_id=ents[b].id,
                           subject_name=ents[a].name, object_name=ents[b].name, relation="knows",
                           edge_type="semantic", fact=f"{ents[a].name} knows {ents[b].name}", confidence=0.8,
                           valid_at=when, invalid_at=ended, created_at=when, episode_ids=(ep.id,)), None))
    return GroupExport(group_id=g, episodes=eps, entities=[(e, None) for e in ents], facts=facts)


def page_figures(path: Path, hub: str) -> dict[str, float]:
    with Browser(timeout_s=60) as browser:
        browser.open(path.as_uri(), ready="document.documentElement.dataset.ready")
        interactive = float(browser.evaluate("+document.documentElement.dataset.ready"))
        index = browser.evaluate(f"[...document.querySelectorAll('#nodes circle')].findIndex(c => c.textContent"
                                 f" === {json.dumps(hub)})")
        started = time.perf_counter()
        browser.click(f'circle[data-i="{index}"]')
        browser.wait_for(f"document.getElementById('facts').innerText.startsWith({json.dumps(hub)})")
        click_ms = (time.perf_counter() - started) * 1000
        labels = browser.evaluate("document.querySelectorAll('#labels text').length")
        browser.screenshot(Path(__file__).resolve().parent / "results" / f"page-{path.stem}.png")
    return {"interactive_ms": interactive, "click_to_facts_ms": click_ms, "labels_drawn": labels}


async def main() -> None:
    n = 2000 if quick() else 20_000
    figures: dict[str, object] = {"messages": n}
    episodes = corpus(n, 20, "imp")
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        root = Path(tmp)
        rate, summary = await import_rate(root, episodes)
        figures["import_messages_per_s"] = round(rate, 1)
        figures["import_closing_count"] = summary
        figures["baseline_ingest_many_per_s"] = round(await ingest_rate(root, episodes), 1)
        figures["import_bar_200_per_s_met"] = rate >= 200

        small = big_group(8)
        for tag, dump in (("5000", big_group(5000)), ("baseline_8", small)):
            t = time.perf_counter()
            html = page_html(dump)
            render_ms = (time.perf_counter() - t) * 1000
            path = root / f"graph-{tag}.html"
            path.write_text(html)
            shown = page_figures(path, "Sam")
            figures[f"page_{tag}_bytes"] = len(html.encode())
            figures[f"page_{tag}_server_render_ms"] = round(render_ms, 1)
            for key, value in shown.items():
                figures[f"page_{tag}_{key}"] = round(value, 1)
        figures["page_bar_interactive_2s_met"] = figures["page_5000_interactive_ms"] <= 2000  # type: ignore[operator]
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("import and graph page" + (" (QUICK)" if quick() else ""), figures)
    write_results("bench_import", figures, "import: MemoryEngine.ingest_many on the same episodes and batches, fresh "
                  "SQLite; page: the 8-entity page, same browser")


if __name__ == "__main__":
    asyncio.run(main())
