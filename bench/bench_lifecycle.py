"""Community upkeep at scale (issue 39): full refresh time and peak RSS on one large group and on many groups,
summary work on an unchanged second refresh (must be 0), and recall p99 idle vs while a refresh runs beside it.

Each refresh is measured in a child process (so its peak RSS is its own, not the loader's); recall is measured
in this process, with the refresh running in the same process beside it (worker and plugin share a process in
`mnemobus run`), its propagation in a thread and in the child process it starts by default. Sizes: full 200k facts in one group and 1M facts in 1,000 groups; QUICK=1 5k and 20k/100;
ONE_GROUP_FACTS, MANY_FACTS, MANY_GROUPS override (a mid-size run on a shared machine); RECALL_ONLY=1 measures
only recall beside a refresh, RECALL_ROUNDS (2) alternations of propagation in a thread and in a child process;
RECALL_FRESH=1 has the first refresh beside recall summarise and write every community (`recall_beside_refresh`).
"""

from __future__ import annotations

import json
import itertools
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, peak_rss_mb, percentile, print_table, quick, write_results  # noqa: E402

from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.communities import CommunityRefresher, RefreshSettings  # noqa: E402
from mnemobus.engine.embed import HashEmbedder  # noqa: E402
from mnemobus.shared.groups import GroupId  # noqa: E402
from mnemobus.store.lifecycle import RetentionPolicy  # noqa: E402
from mnemobus.store.model import Entity, Fact, RecallQuery  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

NOW = datetime(2026, 6, 1, tzinfo=UTC)
COMMUNITY = 40  # entities per planted community
INSIDE = 0.85  # share of facts inside a planted community
RELATIONS = ("works_with", "knows", "likes", "lives_near", "manages", "met")
WORDS = ("alpha", "bravo", "cedar", "delta", "ember", "fjord", "gamma", "harbor", "iris", "juniper", "kestrel",
         "lumen", "maple", "nectar", "onyx", "pine", "quartz", "raven", "sierra", "tundra")
SETTINGS = RefreshSettings(time_budget_s=600, chunk_size=5000)


def sizes() -> tuple[int, int, int]:
    if quick():
        one, many, groups = 5_000, 20_000, 100
    else:
        one, many, groups = 200_000, 1_000_000, 1_000
    return (int(os.environ.get("ONE_GROUP_FACTS", one)), int(os.environ.get("MANY_FACTS", many)),
            int(os.environ.get("MANY_GROUPS", groups)))


def group_rows(group: GroupId, n_facts: int, rng: random.Random) -> tuple[list, list]:
    n_ent = max(COMMUNITY, n_facts // 4)
    ents = [Entity(id=f"{group}:e{i}", group_id=group, name=f"{rng.choice(WORDS).title()} {i}",
                   canonical_name=f"e{i}", first_seen=NOW, last_seen=NOW) for i in range(n_ent)]
    vecs = np.random.default_rng(n_facts).standard_normal((n_facts, 384), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    facts = []
    for i in range(n_facts):
        s = rng.randrange(n_ent)
        if rng.random() < INSIDE:
            base = s - s % COMMUNITY
            o = base + rng.randrange(min(COMMUNITY, n_ent - base))
        else:
            o = rng.randrange(n_ent)
        if o == s:
            o = (s + 1) % n_ent
        rel = rng.choice(RELATIONS)
        a, b = ents[s], ents[o]
        facts.append((Fact(id=f"{group}:f{i}", group_id=group, subject_id=a.id, object_id=b.id, subject_name=a.name,
                           object_name=b.name, relation=rel, edge_type="semantic",
                           fact=f"{a.name} {rel.replace('_', ' ')} {b.name} {rng.choice(WORDS)}", confidence=0.8,
                           valid_at=NOW, invalid_at=None, created_at=NOW, last_seen=NOW), vecs[i]))
    return [(e, None) for e in ents], facts


def load(path: Path, total: int, n_groups: int) -> list[GroupId]:
    async def run() -> list[GroupId]:
        store = SqliteStore(path)
        await store.open()
        rng = random.Random(total + n_groups)
        groups = [GroupId(f"user_life{g}") for g in range(n_groups)]
        batch_e: list = []
        batch_f: list = []
        for g in groups:
            e, f = group_rows(g, total // n_groups, rng)
            batch_e += e
            batch_f += f
            if len(batch_f) >= 20_000 or g == groups[-1]:
                store.bulk_load_sync(batch_e, batch_f)
                batch_e, batch_f = [], []
        await store.close()
        return groups

    return anyio.run(run)


def child(path: str, groups: list[str]) -> None:
    """Refresh every group twice (the second on an unchanged graph); print figures as JSON."""
    async def run() -> dict:
        store = SqliteStore(path)
        await store.open()
        refresher = CommunityRefresher(store, HashEmbedder(), settings=SETTINGS)
        out: dict = {}
        for label in ("first", "second"):
            per_group = []
            summaries = communities = 0
            started = time.perf_counter()
            for g in groups:
                o = await refresher.refresh(GroupId(g))
                assert o.finished, f"{g}: a refresh with a {SETTINGS.time_budget_s}s budget did not finish"
                per_group.append(o.seconds)
                summaries += o.summaries
                communities += o.communities
            out[label] = {"total_s": time.perf_counter() - started, "max_group_s": max(per_group),
                          "p99_group_s": percentile(per_group, 99), "summaries": summaries,
                          "communities": communities}
        out["peak_rss_mb"] = peak_rss_mb()
        await store.close()
        return out

    print(json.dumps(anyio.run(run)))


def refresh_in_child(path: Path, groups: list[GroupId]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", str(path), *groups], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"refresh child failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def recall_beside_refresh(path: Path, group: GroupId, n: int, rounds: int, fresh: bool = False) -> dict:
    """Recall p99 idle, then while refreshes of the same group run beside it in this process, with propagation in
    a thread and in a child process, alternately (`rounds` of each): the same machine load for both. The group's
    communities are stored already, so the refreshes beside recall find an unchanged graph (no summaries, one
    write) unless `fresh` (RECALL_FRESH=1): then its communities are dropped before each busy phase and the first
    refresh beside recall summarises, embeds and writes every one."""
    async def run() -> dict:
        store = SqliteStore(path)
        await store.open()
        engine = MemoryEngine(store, embedder=HashEmbedder())
        rng = random.Random(5)
        queries = [RecallQuery(f"what about {rng.choice(WORDS)} {rng.randrange(1000)}?", (group,), as_of=NOW)
                   for _ in range(n)]
        for q in queries[:20]:
            await engine.recall(q)
        store.vectors.wait_for_indexes()

        async def timed(q: RecallQuery) -> float:
            t = time.perf_counter()
            await engine.recall(q)
            return time.perf_counter() - t

        samples = {mode: {"idle": [], "busy": [], "refreshes": 0, "summaries": 0} for mode in ("thread", "process")}
        for _ in range(rounds):
            for mode, got in samples.items():
                got["idle"] += [await timed(q) for q in queries]
                if fresh:  # the first refresh beside recall summarises and writes every community again
                    stale = [k.id for k in await store.communities(group)]
                    await store.write_communities(group, [], stale, datetime.now(UTC))
                refresher = CommunityRefresher(store, HashEmbedder(), settings=replace(SETTINGS, propagation=mode))
                async with anyio.create_task_group() as tg:
                    running = anyio.Event()

                    async def keep_refreshing(r: CommunityRefresher = refresher, g: dict = got) -> None:
                        while True:
                            running.set()
                            g["summaries"] += (await r.refresh(group)).summaries
                            g["refreshes"] += 1

                    tg.start_soon(keep_refreshing)
                    await running.wait()
                    done_before = got["refreshes"]
                    got["busy"] += [await timed(q) for q in queries]
                    # and on until a whole refresh has run beside recall: a niced child's refresh outlasted the
                    # queries, and its last steps (reading communities back, summaries, writes) went unmeasured
                    for q in itertools.cycle(queries):
                        if got["refreshes"] > done_before:
                            break
                        got["busy"].append(await timed(q))
                    tg.cancel_scope.cancel()
                await refresher.aclose()
        await store.close()
        out: dict = {}
        for mode, got in samples.items():
            out.update({f"{mode}_idle_p99_ms": percentile(got["idle"], 99) * 1000,
                        f"{mode}_idle_p50_ms": percentile(got["idle"], 50) * 1000,
                        f"{mode}_busy_p99_ms": percentile(got["busy"], 99) * 1000,
                        f"{mode}_busy_p50_ms": percentile(got["busy"], 50) * 1000,
                        f"{mode}_refreshes_beside": got["refreshes"], f"{mode}_summaries_beside": got["summaries"]})
        return out

    return anyio.run(run)


def evict_ended(path: Path, groups: list[GroupId]) -> dict:
    """A quarter of every group's facts ended 400 days ago (set here, in SQL: the generator writes only active
    facts), then each group evicted under `retention.ended_days: 365`, as the worker's upkeep does."""
    ended_at, began_at = NOW.timestamp() - 400 * 86400, NOW.timestamp() - 500 * 86400
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE facts SET valid_at = ?, invalid_at = ? WHERE rowid % 4 = 0", (began_at, ended_at))

    async def run() -> dict:
        store = SqliteStore(path)
        await store.open()
        per_group, facts = [], 0
        started = time.perf_counter()
        for g in groups:
            t = time.perf_counter()
            done = await store.evict(g, RetentionPolicy(ended_days=365), now=NOW)
            per_group.append(time.perf_counter() - t)
            facts += done.facts
        total = time.perf_counter() - started
        await store.close()
        return {"evict_total_s": total, "evict_max_group_s": max(per_group), "evicted_facts": facts}

    return anyio.run(run)


def main() -> None:
    one, many, n_groups = sizes()
    figures: dict = {"one_group_facts": one, "many_facts": many, "many_groups": n_groups,
                     "load_average_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="bench-lifecycle-") as tmp:
        one_path = Path(tmp) / "one.sqlite3"
        t = time.perf_counter()
        [group] = load(one_path, one, 1)
        figures["one_load_s"] = round(time.perf_counter() - t, 1)
        r = refresh_in_child(one_path, [group])
        figures.update({"one_refresh_s": round(r["first"]["total_s"], 2),
                        "one_refresh_communities": r["first"]["communities"],
                        "one_refresh_summaries": r["first"]["summaries"],
                        "one_second_refresh_s": round(r["second"]["total_s"], 2),
                        "one_second_refresh_summaries": r["second"]["summaries"],
                        "one_refresh_peak_rss_mb": round(r["peak_rss_mb"], 1)})
        rec = recall_beside_refresh(one_path, group, 200 if quick() else 300, int(os.environ.get("RECALL_ROUNDS", 2)),
                                    fresh=bool(os.environ.get("RECALL_FRESH")))
        figures.update({f"one_recall_{k}": round(v, 3) if isinstance(v, float) else v for k, v in rec.items()})
        figures["one_recall_fresh"] = int(bool(os.environ.get("RECALL_FRESH")))
        for mode in ("thread", "process"):
            figures[f"one_recall_p99_busy_over_idle_{mode}"] = round(
                rec[f"{mode}_busy_p99_ms"] / rec[f"{mode}_idle_p99_ms"], 2)
        figures["one_recall_p99_busy_over_idle"] = figures["one_recall_p99_busy_over_idle_process"]  # the default
        if os.environ.get("RECALL_ONLY"):  # the recall-beside-refresh part alone (a shared machine), on its own file
            finish(figures, "bench_lifecycle_recall")
            return
        one_path.unlink()
        many_path = Path(tmp) / "many.sqlite3"
        t = time.perf_counter()
        groups = load(many_path, many, n_groups)
        figures["many_load_s"] = round(time.perf_counter() - t, 1)
        r = refresh_in_child(many_path, groups)
        figures.update({"many_refresh_total_s": round(r["first"]["total_s"], 2),
                        "many_refresh_max_group_s": round(r["first"]["max_group_s"], 3),
                        "many_refresh_communities": r["first"]["communities"],
                        "many_second_refresh_total_s": round(r["second"]["total_s"], 2),
                        "many_second_refresh_summaries": r["second"]["summaries"],
                        "many_refresh_peak_rss_mb": round(r["peak_rss_mb"], 1)})
        ev = evict_ended(many_path, groups)
        figures.update({"many_evict_total_s": round(ev["evict_total_s"], 2),
                        "many_evict_max_group_s": round(ev["evict_max_group_s"], 3),
                        "many_evicted_facts": ev["evicted_facts"]})
    finish(figures, "bench_lifecycle")


def finish(figures: dict, name: str) -> None:
    figures["peak_rss_mb_main"] = round(peak_rss_mb(), 1)
    figures["load_average_end"] = round(os.getloadavg()[0], 2)
    print_table("bench-lifecycle (SQLite; refresh in a child process, recall beside a refresh in one process)",
                figures)
    write_results(name, figures,
                  "recall p99 with no refresh running, measured in the same run on the same group, alternating with "
                  "the busy runs (one_recall_<thread|process>_idle_p99_ms); bars: one-group refresh <= 10 s and peak RSS <= 1 GB at 200k facts, busy/idle p99 <= 2, "
                  "second-refresh summaries == 0")
    print(f"machine: {machine()}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3:])
    else:
        main()
