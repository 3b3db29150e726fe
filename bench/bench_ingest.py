"""Ingestion on Neo4j against SQLite: the store's write path in one process, then worker processes over NATS.

    python bench/bench_ingest.py            (NEO4J_URI set: use that server; otherwise a local Neo4j is started)

1. engine: `MemoryEngine.ingest_many` in batches of 32 (what a worker hands it per fetch) into SQLite, into
   Neo4j, and into Neo4j one episode per transaction (a fetch of one) - the same episodes, the product's
   extractor and embedder. Statements per batch tell where Neo4j's time goes.
2. workers: k `mnemobus run --role worker` processes (k = 1, 2) sharing one durable consumer on one
   nats-server, N episodes published at once, timed from the first publish to the last one stored; CPU
   seconds per episode of the workers and of the Neo4j server (what capacity planning needs). One worker on
   SQLite is the baseline.

Goal (issue 26): Neo4j >= 200 episodes/s per worker, linear in workers as far as the machine allows.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_seconds, peak_rss_mb, print_table, quick, write_results  # noqa: E402

from mnemobus.shared.proccpu import tree_cpu_seconds  # noqa: E402

from mnemobus.shared import subjects  # noqa: E402
from mnemobus.bus.connection import Bus  # noqa: E402
from mnemobus.shared.config import Settings  # noqa: E402
from mnemobus.engine import MemoryEngine  # noqa: E402
from mnemobus.engine.embedders import make_embedder  # noqa: E402
from mnemobus.shared.envelope import EpisodeMessage  # noqa: E402
from mnemobus.shared.groups import GroupId  # noqa: E402
from mnemobus.kernel.localcluster import LocalDeployment  # noqa: E402
from mnemobus.kernel.neo4j_local import LocalNeo4j, ensure_jars  # noqa: E402
from mnemobus.store.model import Episode, IngestOutcome, episode_id_for  # noqa: E402
from mnemobus.store.neo4j import Neo4jStore  # noqa: E402
from mnemobus.store.neo4j.write_txn import Neo4jWriteTxn  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

CITIES = "Lisbon Porto Madrid Seville Paris Lyon Brussels Amsterdam Hamburg Munich Vienna Zurich Milan Prague".split()
COMPANIES = "Acme Globex Initech Umbrella Hooli Stark Wayne Cyberdyne Soylent Vandelay".split()
PEOPLE = "Anna Ben Carla David Emma Felix Grace Henry Iris Jonas Kara Leo Maya Nina Omar Paula".split()
THINGS = "chess jazz hiking sushi tennis coffee painting cycling pottery climbing".split()
TOOLS = "vim neovim emacs vscode postgres mysql python rust docker kubernetes".split()
TEMPLATES = [
    "I moved to {city}.", "I work at {company} now.", "My sister {person} likes {thing}.",
    "I switched from {tool} to {tool2}.", "{person} works at {company}.", "I really enjoy {thing} on weekends.",
    "My friend {person} lives in {city}.", "Last week I began working for {company}.",
    "We talked about {thing} and {thing2} today.",
]
BATCH = 32
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def corpus(n: int, groups: int, tag: str, seed: int = 7) -> list[Episode]:
    """n chat messages from `groups` users, one a minute, each user's in time order (facts, moves, switches)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        group = GroupId(f"{tag}_u{i % groups}")
        text = rnd.choice(TEMPLATES).format(
            city=rnd.choice(CITIES), company=rnd.choice(COMPANIES), person=rnd.choice(PEOPLE), thing=rnd.choice(THINGS),
            thing2=rnd.choice(THINGS), tool=rnd.choice(TOOLS), tool2=rnd.choice(TOOLS))
        out.append(Episode(id=episode_id_for(group, f"{tag}-{i}", "user"), group_id=group, content=text, role="user",
                           source_message_id=f"{tag}-{i}", reference_time=T0 + timedelta(minutes=i)))
    return out


async def engine_rate(store, episodes: Sequence[Episode], batch: int) -> float:  # type: ignore[no-untyped-def]
    emb = make_embedder("static", "all-MiniLM-L6-v2-int8")
    engine = MemoryEngine(store, embedder=emb)
    t = time.perf_counter()
    for i in range(0, len(episodes), batch):
        for outcome in await engine.ingest_many(episodes[i : i + batch]):
            if not isinstance(outcome, IngestOutcome):
                raise RuntimeError(f"an episode failed: {outcome!r}")
    return len(episodes) / (time.perf_counter() - t)


def count_statements() -> list[int]:
    """Statements write transactions send (patched in: the bench's own process only)."""
    counter = [0]
    real = Neo4jWriteTxn._run

    async def run(self, query, **params):  # type: ignore[no-untyped-def]
        counter[0] += 1
        return await real(self, query, **params)

    Neo4jWriteTxn._run = run  # type: ignore[method-assign]
    return counter


async def warm_up(uri: str, min_s: float, max_s: float) -> float:
    """Ingest throw-away episodes until the rate holds still (two rounds within 10%, after `min_s`; at most
    `max_s`); returns the seconds it took. A fresh Neo4j runs its queries interpreted until the JVM has compiled
    them: its CPU per episode fell from 26 ms to 4.5 ms over the first two minutes of ingesting."""
    neo = Neo4jStore(uri)
    await neo.open()
    started = time.monotonic()
    rates: list[float] = []
    try:
        while time.monotonic() - started < max_s:
            eps = corpus(320, 32, f"warm{int(time.time() * 1000)}", seed=int(time.time()))
            rates.append(await engine_rate(neo, eps, BATCH))
            for group in sorted({e.group_id for e in eps}):
                await neo.delete_group(group)
            steady = len(rates) >= 2 and abs(rates[-1] - rates[-2]) <= 0.1 * max(rates[-2:])
            if steady and time.monotonic() - started >= min_s:
                break
    finally:
        await neo.close()
    return time.monotonic() - started


async def bench_engine(uri: str, root: Path, figures: dict[str, float]) -> None:
    n = 200 if quick() else 1200
    figures["neo4j_warmup_s"] = round(await warm_up(uri, *((10.0, 30.0) if quick() else (90.0, 300.0))), 1)
    episodes = corpus(n, max(n // 10, 10), f"be{int(time.time())}")
    sqlite = SqliteStore(root / "engine.sqlite3")
    await sqlite.open()
    try:
        figures["engine_sqlite_eps"] = round(await engine_rate(sqlite, episodes, BATCH), 1)
    finally:
        await sqlite.close()
    statements = count_statements()
    for label, batch, eps in (("engine_neo4j_eps", BATCH, episodes),
                              ("engine_neo4j_one_per_txn_eps", 1, corpus(n // 4, max(n // 40, 5), f"b1{int(time.time())}"))):
        neo = Neo4jStore(uri)
        await neo.open()
        try:
            before = statements[0]
            figures[label] = round(await engine_rate(neo, eps, batch), 1)
            if batch == BATCH:
                figures["engine_neo4j_statements_per_batch"] = round((statements[0] - before) / (len(eps) / BATCH), 2)
            for group in sorted({e.group_id for e in eps}):
                await neo.delete_group(group)
        finally:
            await neo.close()


async def publish(url: str, episodes: Sequence[Episode]) -> None:
    bus = await Bus.connect(url, Settings().nats, name="bench-ingest")
    try:
        for i in range(0, len(episodes), 200):
            await asyncio.gather(*(bus.js_publish(
                subjects.episode(e.group_id), EpisodeMessage(
                    episode_id=e.id, group_id=e.group_id, content=e.content, source_message_id=e.source_message_id,
                    reference_time=e.reference_time).to_wire(), msg_id=e.id) for e in episodes[i : i + 200]))
    finally:
        await bus.close()


async def stored(store, groups: Sequence[GroupId]) -> int:  # type: ignore[no-untyped-def]
    return sum(await asyncio.gather(*(store.count_episodes(g) for g in groups)))


async def bench_workers(uri: str, server: LocalNeo4j | None, root: Path, backend: str, workers: int,
                        figures: dict[str, float]) -> None:
    n = 300 if quick() else 2400
    tag = f"w{backend[0]}{workers}{int(time.time())}"
    episodes = corpus(n, max(n // 8, 10), tag)
    groups = sorted({e.group_id for e in episodes})
    env = {"MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "static", "MNEMOBUS_LOG_LEVEL": "WARNING"}
    if backend == "sqlite":
        env.update({"MNEMOBUS_STORE__BACKEND": "sqlite", "MNEMOBUS_STORE__SQLITE_PATH": str(root / f"{tag}.sqlite3")})
    deployment = LocalDeployment(root / tag, plugins=0, workers=workers, api=False, worldstate=False, nats_nodes=1,
                                 replicas=1, neo4j_uri=uri, env=env)
    deployment.start()
    store = SqliteStore(root / f"{tag}.sqlite3") if backend == "sqlite" else Neo4jStore(uri, vector_cache_mb=None)
    try:
        await store.open()
        pids = [p.pid for p in deployment.roles] + ([server.proc.pid] if server and server.proc and backend == "neo4j" else [])
        before = await store.count_episodes()
        # a worker's CPU with its children's (the parse child, the community propagation child)
        cpu_of = [tree_cpu_seconds] * workers + [cpu_seconds] * (len(pids) - workers)
        cpu0 = [f(pid) for f, pid in zip(cpu_of, pids, strict=True)]
        t0 = time.perf_counter()
        await publish(deployment.cluster.url, episodes)  # type: ignore[union-attr]
        deadline = time.monotonic() + 900
        # one count of the whole store per poll: a count per group (hundreds of queries every 0.2 s) cost the Neo4j
        # server more CPU than the workers' writes and was charged to them
        while (done := await store.count_episodes() - before) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        elapsed = time.perf_counter() - t0
        cpu = [f(pid) - c for f, pid, c in zip(cpu_of, pids, cpu0, strict=True)]
        done = min(done, await stored(store, groups))  # exactly the episodes of this run
        key = f"workers_{backend}_{workers}"
        figures[f"{key}_eps"] = round(done / elapsed, 1)
        figures[f"{key}_stored"] = done
        figures[f"{key}_worker_cpu_ms_per_episode"] = round(1000 * sum(cpu[:workers]) / max(done, 1), 2)
        if backend == "neo4j" and len(cpu) > workers:
            figures[f"{key}_neo4j_cpu_ms_per_episode"] = round(1000 * cpu[workers] / max(done, 1), 2)
        figures[f"{key}_load_avg"] = round(os.getloadavg()[0], 2)
        if backend == "neo4j":
            for group in groups:
                await store.delete_group(group)
    finally:
        await store.close()
        deployment.stop()


async def main() -> int:
    make_embedder("static", "all-MiniLM-L6-v2-int8")  # the table is built once here, not by each worker
    figures: dict[str, float] = {}
    with ExitStack() as stack:
        uri = os.environ.get("NEO4J_URI")
        server = None
        if not uri:
            ensure_jars()
            server = stack.enter_context(LocalNeo4j(heap="1g", pagecache="512m"))
            uri = server.uri
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ingest-")))
        await bench_engine(uri, root, figures)
        await bench_workers(uri, server, root, "sqlite", 1, figures)
        for workers in (1, 2):
            await bench_workers(uri, server, root, "neo4j", workers, figures)
    figures["workers_neo4j_2_over_1"] = round(figures["workers_neo4j_2_eps"] / figures["workers_neo4j_1_eps"], 2)
    figures["bench_peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table("ingestion: Neo4j against SQLite (episodes/s; the product's extractor and static embedder)", figures)
    if server is None:
        print("(Neo4j CPU per episode needs the bench's own server: unset NEO4J_URI)")
    write_results("bench_ingest", figures, baseline="the embedded SQLite store (in process and one worker), same "
                  "episodes, same run")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
