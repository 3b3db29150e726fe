"""Where the request path's time goes: CPU per request and a profile of each part (issue 36).

Run: `.venv/bin/python bench/profile_request.py plugin|recall|breakdown|statements|sql|bounds [--pyspy] [--n N]`
(py-spy: `pip install py-spy`, a profiling tool only, not a dependency of mnemobus).

- `plugin`: a real nats-server and ONE memory plugin process (bench/pipeline_server.py) on groups of 10k facts
  filled through the engine (the filled store is kept under $PROFILE_CACHE, default /tmp/mnemobus-profile, so
  before/after runs share it). It sends N enriched requests and N requests of a skill memory skips, in
  alternating blocks, closed loop, and reads the plugin process's CPU time (/proc) around each block: the CPU
  an enriched request costs beside the bare relay through the same process, which wall time on a shared
  machine cannot give. --pyspy samples it with py-spy (bench/profiles/plugin.svg; --pyspy-format raw: collapsed stacks for
  bench/stacks.py). Figures go to bench/results/profile_plugin.json.
- `recall`: MemoryEngine.recall in process on one 10k-fact group (bench_engine's bulk load, hashing embedder
  for the query as bench_engine does), CPU time per recall (time.process_time). Figures go to
  bench/results/profile_recall.json; for its flame graph run it under py-spy
  (`py-spy record -o bench/profiles/recall_10k.svg -- .venv/bin/python bench/profile_request.py recall --pyspy`).
- `breakdown`: the plugin's steps for one enriched request, in process on the `plugin` run's filled store, each
  timed on the CPU clock of the thread it runs on (recall's reads run on one worker thread): envelope parsing
  and validation, identity, query embedding, each store read, fusion and the rest of recall, top-k, rendering,
  the enriched envelope, the episode envelopes. `--evict-mb 64`: 64 MB written between requests, so each finds
  the caches cold, as a request does in a process woken for it (bench-pipeline's open-loop CPU step): the parts
  whose data is large (vectors, index pages) cost two to three times their warm figure there. Figures go to
  bench/results/profile_breakdown.json.
- `statements`: the SQL statements a recall sends on that store and its three groups (FTS5's own apart).
  Figures go to bench/results/profile_statements.json.
- `sql`: the CPU a recall spends in each kind of SQL statement on that store (each statement run to its last
  row on the calling thread's CPU clock): what the store reads' share of `breakdown` is made of. Figures go to
  bench/results/profile_sql.json.
- `bounds`: the most a per-process cache of each of recall's costlier reads could save, on that store: the read
  memoised, on and off in alternating blocks of N recalls in one process (`--blocks`), CPU a recall each way.
  Figures go to bench/results/profile_bounds.json.
cProfile is not used: it sees only the thread it started on, and recall's reads run on a worker thread.
Profiling adds its own cost: compare CPU figures only between runs without a profiler.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_seconds, percentile, print_table, write_results  # noqa: E402

PROFILES = Path(__file__).parent / "profiles"
CACHE = Path(os.environ.get("PROFILE_CACHE", "/tmp/mnemobus-profile"))


# -- recall in the engine ------------------------------------------------------------------------------------


async def profile_recall(n: int) -> dict[str, float]:
    from bench_engine import NOW, RNG, VOCAB, bulk_load

    from mnemobus.engine import MemoryEngine
    from mnemobus.engine.embed import HashEmbedder
    from mnemobus.store.model import RecallQuery
    from mnemobus.store.sqlite import SqliteStore

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / "recall_10k.sqlite3"
    fresh = not path.exists()
    store = SqliteStore(path)
    await store.open()
    if fresh:
        groups = await asyncio.to_thread(bulk_load, store, 10_000, 1)
        (CACHE / "recall_10k.names").write_text("\n".join(groups[0][1]))
    names = (CACHE / "recall_10k.names").read_text().split("\n")
    group = "user_bench0"
    engine = MemoryEngine(store, embedder=HashEmbedder())
    queries = [f"what about {RNG.choice(names)} and {RNG.choice(VOCAB)}?" for _ in range(n)]
    for q in queries[:50]:
        await engine.recall(RecallQuery(q, (group,), as_of=NOW, max_facts=10, max_episodes=3))
    store.vectors.wait_for_indexes()  # the IVF build runs on a thread of this process: not a recall's CPU
    cpu, wall = [], []
    for q in queries:
        c, t = time.process_time(), time.perf_counter()
        await engine.recall(RecallQuery(q, (group,), as_of=NOW, max_facts=10, max_episodes=3))
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
    await engine.close()
    return {"recall_10k_cpu_ms_mean": round(1000 * sum(cpu) / n, 3),
            "recall_10k_cpu_ms_p50": round(1000 * percentile(cpu, 50), 3),
            "recall_10k_wall_p50_ms": round(1000 * percentile(wall, 50), 3),
            "recall_10k_wall_p99_ms": round(1000 * percentile(wall, 99), 3)}


# -- the steps of one enriched request, each timed on its own thread's CPU clock ------------------------------

STORE_STEPS = ("search_facts_text", "search_facts_vector", "search_entities_text", "search_entities_vector",
               "search_episodes_text", "search_episodes_vector", "walk", "fact_standings", "get_episodes",
               "episode_context", "get_facts", "mark_retrieved", "promoted_in_recall")


def _timed(spent: dict[str, float], name: str, fn, clock=time.thread_time):  # type: ignore[no-untyped-def]
    """`fn` with the CPU time of the thread it runs on added to spent[name] (recall's reads share one thread);
    `clock=time.perf_counter` adds wall time instead (a read waiting on the page cache or the scheduler)."""
    import inspect

    if inspect.iscoroutinefunction(fn):
        async def async_wrapper(*a, **k):  # type: ignore[no-untyped-def]
            t = clock()
            try:
                return await fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + clock() - t
        return async_wrapper

    def wrapper(*a, **k):  # type: ignore[no-untyped-def]
        t = clock()
        try:
            return fn(*a, **k)
        finally:
            spent[name] = spent.get(name, 0.0) + clock() - t
    return wrapper


async def breakdown(n: int, evict_mb: int = 0, found: bool = False) -> dict[str, float]:
    """Each step of the plugin's work for one enriched request, in process on the plugin bench's filled store:
    CPU microseconds a request, per step. The bus's own work (sockets, the client library) is not here: the
    py-spy profile of the plugin process shows its share."""
    import threading

    import numpy as np
    from bench_pipeline import _request

    from mnemobus.bus.endpoint import parse_message
    from mnemobus.shared.config import load_settings
    from mnemobus.kernel.backends import open_engine
    from mnemobus.engine.promoted import render_with_promoted
    from mnemobus.shared.envelope import EnrichedRequest, EpisodeMessage, MemoryContext, SkillRequest
    from mnemobus.shared.identity import IdentityRegistry
    from mnemobus.shared.limits import query_tail
    from mnemobus.store.model import RecallQuery, RecallResult, episode_id_for

    if not (CACHE / "plugin.sqlite3.filled").exists():
        raise SystemExit("run `bench/profile_request.py plugin` once first: it fills the store this reads")
    with tempfile.TemporaryDirectory(prefix="mnemobus-profile-") as tmp:
        settings = load_settings(_settings_file(Path(tmp), "nats://127.0.0.1:1"))
        identity = IdentityRegistry(settings.identity.users_file)
        engine = await open_engine(settings)
        cfg = settings.memory
        spent: dict[str, float] = {}
        store = engine.store
        for name in STORE_STEPS:
            setattr(store, name, _timed(spent, name, getattr(store, name)))
        engine.embedder.embed = _timed(spent, "query_embedding", engine.embedder.embed)  # type: ignore[method-assign]
        run_reads = store.run_reads

        loop_thread = threading.get_ident()

        async def timed_reads(work, prepare):  # type: ignore[no-untyped-def]
            def where(*a):  # type: ignore[no-untyped-def]
                # on the loop (a loaded group's reads) recall_total holds their time; on a thread it does not
                off = threading.get_ident() != loop_thread
                return _timed(spent, "recall_worker_thread" if off else "recall_reads_on_loop", work)(*a)
            return await run_reads(where, prepare)

        store.run_reads = timed_reads  # type: ignore[method-assign]
        wire = [_request(i, "bench", found=found) for i in range(n)]

        def step(name, fn, *a, **k):  # type: ignore[no-untyped-def]
            return _timed(spent, name, fn)(*a, **k)

        async def one(data: bytes) -> None:
            req = step("envelope_parse_validate", parse_message, SkillRequest, data,
                       settings.nats.max_message_bytes)
            who = step("identity", identity.resolve, req.source.platform, req.source.user_id,
                       req.payload.meta.agent_id, req.payload.meta.system_actor)
            query = RecallQuery(text=query_tail(req.payload.content), group_ids=who.read_groups,
                                max_facts=cfg.max_facts, max_episodes=cfg.max_episodes, max_items=cfg.max_items,
                                promoted=settings.promotion.max_items, sessions=(req.source.channel_id,))
            result = await _timed(spent, "recall_total", engine.recall)(query)
            merged = step("top_k", result.top, cfg.max_items)
            block = step("render", render_with_promoted, merged, merged.promoted, cfg.context_budget_chars,
                         settings.promotion.budget_share)
            memory = MemoryContext(groups=list(who.read_groups), block=block, facts=len(merged.facts),
                                   episodes=len(merged.episodes), status="enriched" if block else "empty")

            def enrich() -> bytes:
                enriched = EnrichedRequest.model_validate(req.model_dump(by_alias=True))
                enriched.memory = memory
                enriched.original_content = req.payload.content
                enriched.payload.content = f"{memory.block}\n\n{req.payload.content}"
                return enriched.to_wire()

            step("enriched_envelope", enrich)

            def episodes() -> list[bytes]:
                return [EpisodeMessage(episode_id=episode_id_for(g, req.id, "exchange"), group_id=g,
                                       content=req.payload.content, response="ok", source_message_id=req.id,
                                       correlation_id=req.trace_id, agent_id=req.payload.meta.agent_id,
                                       platform=req.source.platform, channel_id=req.source.channel_id,
                                       user_id=req.source.user_id, speaker_name="josh",
                                       reference_time=req.timestamp).to_wire() for g in who.groups]

            step("episode_envelopes", episodes)

        for data in wire[:50]:
            await one(data)
        spent.clear()
        # float64 items, 8 to a 64-byte cache line: a write to each line between requests leaves the caches holding
        # none of a request's data, as a request finds them in a process woken for it (bench-pipeline's CPU step)
        evicting = np.ones(evict_mb << 17) if evict_mb else None
        total = 0.0
        for data in wire:
            if evicting is not None:
                evicting[::8] += 1.0
            t = time.process_time()
            await one(data)
            total += time.process_time() - t
        await engine.close()
    per = {k: round(1e6 * v / n, 1) for k, v in spent.items()}
    store_total = sum(v for k, v in per.items() if k in STORE_STEPS and k != "mark_retrieved")
    out = {f"us_{k}": v for k, v in sorted(per.items(), key=lambda kv: -kv[1])}
    out["us_recall_store_reads"] = round(store_total, 1)
    out["us_recall_fusion_scoring_rest"] = round(per["recall_total"] + per.get("recall_worker_thread", 0.0) - store_total
                                                 - per.get("mark_retrieved", 0), 1)
    out["us_process_cpu_per_request"] = round(1e6 * total / n, 1)
    out["recalled_groups"] = len(who_groups(identity))
    out["evicted_mb_between_requests"] = evict_mb
    out["questions_memory_answers"] = int(found)
    return out


async def statements(n: int) -> dict[str, float]:
    """SQL statements a recall sends, on the plugin bench's store and groups (the reader connections traced;
    what FTS5 runs inside a MATCH, traced with a leading "--", counted apart)."""
    from mnemobus.shared.config import load_settings
    from mnemobus.kernel.backends import open_engine
    from mnemobus.shared.identity import IdentityRegistry
    from mnemobus.store.sqlite import SqliteStore

    if not (CACHE / "plugin.sqlite3.filled").exists():
        raise SystemExit("run `bench/profile_request.py plugin` once first: it fills the store this reads")
    seen: list[str] = []
    connect = SqliteStore._connect

    def traced(self):  # type: ignore[no-untyped-def]
        conn = connect(self)
        conn.set_trace_callback(seen.append)
        return conn

    SqliteStore._connect = traced  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="mnemobus-profile-") as tmp:
        settings = load_settings(_settings_file(Path(tmp), "nats://127.0.0.1:1"))
        groups = who_groups(IdentityRegistry(settings.identity.users_file))
        engine = await open_engine(settings)
        queries = _queries(settings, groups, n)
        for q in queries:
            await engine.recall(q)
        seen.clear()
        for q in queries:
            await engine.recall(q)
        await engine.close()
    own = sum(not s.startswith("--") for s in seen)
    return {"statements_per_recall": round(own / n, 1), "fts5_internal_statements_per_recall":
            round((len(seen) - own) / n, 1), "recalled_groups": len(groups)}


class _TimedCursor:
    """A cursor's rows, fetched while the statement was timed (`_TimedConnection`)."""

    def __init__(self, rows: list, cursor) -> None:  # type: ignore[no-untyped-def,type-arg]
        self.rows, self.rowcount, self.lastrowid = rows, cursor.rowcount, cursor.lastrowid
        self.description = cursor.description

    def fetchall(self) -> list:  # type: ignore[type-arg]
        return self.rows

    def fetchone(self):  # type: ignore[no-untyped-def]
        return self.rows[0] if self.rows else None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.rows)


class _TimedConnection:
    """A reader connection whose every statement is run to its last row at once, on the calling thread's CPU
    clock: what each statement costs, which a trace callback (no times) and cProfile (a cursor's rows are
    stepped inside its caller's frame) cannot say."""

    def __init__(self, conn, spent: dict, count: dict, rows: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_tally", (spent, count, rows))

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value) -> None:  # type: ignore[no-untyped-def]
        setattr(self._conn, name, value)

    def execute(self, sql: str, *params):  # type: ignore[no-untyped-def]
        import re

        t = time.thread_time()
        cursor = self._conn.execute(sql, *params)
        rows = cursor.fetchall()
        took = time.thread_time() - t  # before the key: a regex over the turns' 8 KB text costs more than the read
        spent, count, got = self._tally
        key = re.sub(r"\s+", " ", sql).strip()[:100]
        spent[key] = spent.get(key, 0.0) + took
        count[key] = count.get(key, 0) + 1
        got[key] = got.get(key, 0) + len(rows)
        return _TimedCursor(rows, cursor)


async def sql_costs(n: int, found: bool = False) -> dict[str, float]:
    """CPU a recall spends in each kind of SQL statement (by its text's first 100 characters), on the plugin
    bench's store and groups: statements a recall, rows each, microseconds a recall."""
    from mnemobus.kernel.backends import open_engine
    from mnemobus.shared.config import load_settings
    from mnemobus.shared.identity import IdentityRegistry
    from mnemobus.store.sqlite import SqliteStore

    if not (CACHE / "plugin.sqlite3.filled").exists():
        raise SystemExit("run `bench/profile_request.py plugin` once first: it fills the store this reads")
    spent: dict[str, float] = {}
    count: dict[str, int] = {}
    rows: dict[str, int] = {}
    connect = SqliteStore._connect
    with tempfile.TemporaryDirectory(prefix="mnemobus-profile-") as tmp:
        settings = load_settings(_settings_file(Path(tmp), "nats://127.0.0.1:1"))
        engine = await open_engine(settings)
        # after the writer opened: the reader connections, made at a recall's first borrow, are the timed ones
        def timed(self):  # type: ignore[no-untyped-def]
            return _TimedConnection(connect(self), spent, count, rows)

        SqliteStore._connect = timed  # type: ignore[method-assign]
        queries = _queries(settings, who_groups(IdentityRegistry(settings.identity.users_file)), n, found)
        for q in queries:
            await engine.recall(q)
        engine.store.vectors.wait_for_indexes()
        for tally in (spent, count, rows):
            tally.clear()
        t = time.process_time()
        for q in queries:
            await engine.recall(q)
        total = time.process_time() - t
        await engine.close()
    out: dict[str, float] = {"us_process_cpu_per_recall": round(1e6 * total / n, 1),
                             "us_sql_per_recall": round(1e6 * sum(spent.values()) / n, 1)}
    for key in sorted(spent, key=lambda k: -spent[k])[:15]:
        out[f"us {key}"] = round(1e6 * spent[key] / n, 1)
        out[f"n {key}"] = round(count[key] / n, 2)
        out[f"rows {key}"] = round(rows[key] / count[key], 1)
    return out


def who_groups(identity) -> tuple:  # type: ignore[no-untyped-def]
    return identity.resolve("discord", "111", "bench", None).read_groups


def _queries(settings, groups: tuple, n: int, found: bool = False) -> list:  # type: ignore[no-untyped-def]
    """The plugin bench's questions (`found`: those whose answers memory holds) over the bench user's groups."""
    from bench_pipeline import question

    from mnemobus.store.model import RecallQuery

    cfg = settings.memory
    return [RecallQuery(question(i, found=found), groups, max_facts=cfg.max_facts, max_episodes=cfg.max_episodes)
            for i in range(n)]


# -- what a cache of each read could at most save ------------------------------------------------------------

BOUND_READS = ("get_episodes", "episode_context", "get_facts", "walk", "search_entities_text", "search_facts_vector")


def _memo_key(args: tuple, kwargs: dict) -> tuple:  # type: ignore[type-arg]
    import numpy as np

    def one(x):  # type: ignore[no-untyped-def]
        return x.tobytes() if isinstance(x, np.ndarray) else tuple(x) if isinstance(x, list) else x
    return tuple(map(one, args)), tuple((k, one(v)) for k, v in sorted(kwargs.items()))


async def bounds(n: int, blocks: int) -> dict[str, float]:
    """The most a per-process cache of each read could save a recall, on the plugin bench's store and groups.

    The read is memoised by its arguments and switched on and off in alternating blocks of the same N queries in
    one process, so every read after the first is a hit and both sides see the same machine; CPU a recall each
    way (time.process_time). An upper bound: a real cache also checks its rows are current, and production
    rarely repeats a query. Alternating in one process because whole runs swing by more than these figures.
    """
    import statistics

    from mnemobus.kernel.backends import open_engine
    from mnemobus.shared.config import load_settings
    from mnemobus.shared.identity import IdentityRegistry

    if not (CACHE / "plugin.sqlite3.filled").exists():
        raise SystemExit("run `bench/profile_request.py plugin` once first: it fills the store this reads")
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mnemobus-profile-") as tmp:
        settings = load_settings(_settings_file(Path(tmp), "nats://127.0.0.1:1"))
        engine = await open_engine(settings)
        store = engine.store
        queries = _queries(settings, who_groups(IdentityRegistry(settings.identity.users_file)), n)
        for q in queries:
            await engine.recall(q)
        store.vectors.wait_for_indexes()  # the index builds run on threads of this process: not a recall's CPU
        plain_cpu: list[float] = []
        for name in BOUND_READS:
            plain, memo = getattr(store, name), {}

            async def memoised(*a, _plain=plain, _memo=memo, **k):  # type: ignore[no-untyped-def]
                key = _memo_key(a, k)
                if key not in _memo:
                    _memo[key] = await _plain(*a, **k)
                return _memo[key]

            cpu: dict[bool, list[float]] = {True: [], False: []}
            for b in range(blocks):
                for on in ((True, False) if b % 2 == 0 else (False, True)):
                    setattr(store, name, memoised if on else plain)
                    t = time.process_time()
                    for q in queries:
                        await engine.recall(q)
                    cpu[on].append(1e6 * (time.process_time() - t) / n)
            setattr(store, name, plain)
            saved = [off - on for on, off in zip(cpu[True], cpu[False], strict=True)]
            out[f"us_saved_at_most_{name}"] = round(statistics.mean(saved))
            out[f"blocks_lower_{name}"] = sum(x > 0 for x in saved)
            plain_cpu += cpu[False]
        await engine.close()
    out["us_recall_cpu_mean"] = round(statistics.mean(plain_cpu))
    out["blocks_each_way"] = blocks
    out["recalls_a_block"] = n
    return out


# -- an enriched request through the plugin ------------------------------------------------------------------


def _settings_file(tmpd: Path, url: str) -> Path:
    import yaml

    users = tmpd / "users.yaml"
    users.write_text("users:\n  - id: josh\n    identities:\n      discord: '111'\n")
    cfg = {"nats": {"url": url}, "store": {"sqlite_path": str(CACHE / "plugin.sqlite3")},
           # no shedding: a recall skipped for load costs next to nothing, so skips (which vary run to run with the
           # machine's load) made CPU per enriched request a figure of the load, not of the code (issue 36)
           "memory": {"recall_deadline_ms": 1000.0, "shed_loop_lag_ms": 0, "recall_time_share": 0},
           "metrics": {"port": 0},
           "identity": {"users_file": str(users)}, "log_level": "WARNING",
           "worker": {}}
    path = tmpd / "m.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


async def _started(tmpd: Path):
    """A nats-server of its own, the settings the plugin bench's processes read, and the filled store (with the fill's
    figures when it was filled now); the caller stops the server."""
    from mnemobus.bus.server import EmbeddedNatsServer
    from mnemobus.shared.config import load_settings

    server = EmbeddedNatsServer(tmpd / "nats")
    server.start()
    settings_path = _settings_file(tmpd, server.url or "")
    settings = load_settings(settings_path)
    return server, settings_path, settings, await _filled(settings)


async def _filled(settings) -> dict[str, float]:
    """The plugin bench's store under CACHE, filled once (bench-pipeline's fill) and kept for later runs."""
    from bench_pipeline import fill

    from mnemobus.shared.groups import GroupId

    if (CACHE / "plugin.sqlite3.filled").exists():
        return {}
    for p in CACHE.glob("plugin.sqlite3*"):
        p.unlink()
    figures = await fill(settings, [GroupId("user_josh"), GroupId("agent_bench__user_josh")])
    (CACHE / "plugin.sqlite3.filled").write_text("1")
    return figures


async def profile_plugin(n: int, with_pyspy: bool, pyspy_format: str = "flamegraph",
                         kinds: tuple[str, ...] = ("enriched", "new_user", "relay")) -> dict[str, float]:
    from bench_pipeline import NEW_USER, RELAY_SKILL, _direct, _request, closed_loop

    from mnemobus.shared import subjects
    from mnemobus.bus.connection import Bus

    CACHE.mkdir(parents=True, exist_ok=True)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mnemobus-profile-") as tmp:
        server, settings_path, settings, filled = await _started(Path(tmp))
        figures.update(filled)
        proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "pipeline_server.py"), str(settings_path)],
                                stdout=subprocess.PIPE, text=True)
        spy = None
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
            bus = await Bus.connect(server.url or "", settings.nats, name="profile")
            await closed_loop(bus, subjects.SKILL_REQUEST, lambda i: _request(i, "bench"), 100)  # warm
            await closed_loop(bus, subjects.SKILL_REQUEST, lambda i: _request(i, "bench", RELAY_SKILL), 50)
            if with_pyspy:
                PROFILES.mkdir(exist_ok=True)
                spy = subprocess.Popen([shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"), "record",
                                        "--pid", str(proc.pid), "-r", "250", "-f", pyspy_format,
                                        "-o", str(PROFILES / ("plugin.svg" if pyspy_format == "flamegraph" else
                                                              "plugin.collapsed.txt"))],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(1.0)
            makers = {"enriched": lambda i: _request(i, "bench"),
                      "enriched_found": lambda i: _request(i, "bench", found=True),
                      # a user nobody has written to: all of memory's work but the finding
                      "new_user": lambda i: _request(i, "bench", user=NEW_USER),
                      "relay": lambda i: _request(i, "bench", RELAY_SKILL)}
            cpu = dict.fromkeys(makers, 0.0)
            loop_cpu = dict.fromkeys(makers, 0.0)  # the event loop's thread alone (its tid is the pid)
            lat: dict[str, list[float]] = {kind: [] for kind in (*makers, "bare")}
            block = 50
            for start in range(0, n, block):  # alternated, so all see the same machine
                for kind, make in ((k, makers[k]) for k in kinds):
                    before, loop_before = cpu_seconds(proc.pid), cpu_seconds(proc.pid, proc.pid)
                    lat[kind] += await closed_loop(bus, subjects.SKILL_REQUEST, lambda i, s=start, m=make: m(s + i), block)
                    cpu[kind] += cpu_seconds(proc.pid) - before
                    loop_cpu[kind] += cpu_seconds(proc.pid, proc.pid) - loop_before
                lat["bare"] += await closed_loop(bus, subjects.skill_execute("bench"), _direct, block)
            await bus.close()
            for kind in makers:  # a kind not sent (--kinds) reads as nothing, not as a failed percentile
                lat[kind] = lat[kind] or [0.0]
            figures.update({
                "plugin_cpu_ms_per_request_enriched": round(1000 * cpu["enriched"] / n, 3),
                # a question whose answer memory holds (--kinds enriched_found): the text searches match, facts shown
                "plugin_cpu_ms_per_request_enriched_found": round(1000 * cpu["enriched_found"] / n, 3),
                "enriched_found_p50_ms": round(1000 * percentile(lat["enriched_found"], 50), 3),
                "plugin_cpu_ms_per_request_new_user": round(1000 * cpu["new_user"] / n, 3),
                "plugin_cpu_ms_per_request_relay_only": round(1000 * cpu["relay"] / n, 3),
                "memory_cpu_ms_per_request": round(1000 * (cpu["enriched"] - cpu["relay"]) / n, 3),
                # where an enriched request's CPU runs: the event loop (bus, envelopes, the plugin's steps) or the
                # other threads (recall's reads and query embedding, one worker-thread hop a recall)
                "loop_thread_cpu_ms_per_request_enriched": round(1000 * loop_cpu["enriched"] / n, 3),
                "other_threads_cpu_ms_per_request_enriched":
                    round(1000 * (cpu["enriched"] - loop_cpu["enriched"]) / n, 3),
                "loop_thread_cpu_ms_per_request_relay_only": round(1000 * loop_cpu["relay"] / n, 3),
                "enriched_p50_ms": round(1000 * percentile(lat["enriched"], 50), 3),
                "new_user_p50_ms": round(1000 * percentile(lat["new_user"], 50), 3),
                "relay_only_p50_ms": round(1000 * percentile(lat["relay"], 50), 3),
                "bare_relay_p50_ms": round(1000 * percentile(lat["bare"], 50), 3),
                "added_p50_ms": round(1000 * (percentile(lat["enriched"], 50) - percentile(lat["bare"], 50)), 3),
                "added_p99_ms": round(1000 * (percentile(lat["enriched"], 99) - percentile(lat["bare"], 99)), 3),
                "requests": n,
            })
        finally:
            if spy is not None:
                spy.send_signal(2)
                spy.wait(timeout=60)
            proc.terminate()
            proc.wait(timeout=60)
            server.stop()
    return figures


async def relay_floor(rate: float, seconds: float, rounds: int) -> dict[str, float]:
    """CPU a request of the plugin's relay beside the same hops on bare nats-py (`relay_floor_server.py`), open loop.

    Open loop at a rate well under capacity, as bench-pipeline's CPU step: each request wakes an idle process, which
    is what a request costs in production, where a closed loop's back-to-back requests find the caches warm. The
    kinds run in turn for `seconds` each, `rounds` times, so all see the same machine."""
    from bench_pipeline import JOSH, NEW_USER, RELAY_SKILL, _request, closed_loop, open_loop

    from mnemobus.bus.connection import Bus
    from mnemobus.shared import subjects

    CACHE.mkdir(parents=True, exist_ok=True)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="mnemobus-floor-") as tmp:
        server, settings_path, settings, filled = await _started(Path(tmp))
        figures.update(filled)
        here = Path(__file__).parent
        plugin = subprocess.Popen([sys.executable, str(here / "pipeline_server.py"), str(settings_path)],
                                  stdout=subprocess.PIPE, text=True)
        floor = subprocess.Popen([sys.executable, str(here / "relay_floor_server.py"), server.url or ""],
                                 stdout=subprocess.PIPE, text=True)
        try:
            for proc in (plugin, floor):
                assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
            bus = await Bus.connect(server.url or "", settings.nats, name="floor")
            await closed_loop(bus, subjects.SKILL_REQUEST, lambda i: _request(i, "bench"), 100)  # warm
            kinds = {  # name: (subject, request, headers, the process that serves it)
                "plugin_relay_only": (subjects.SKILL_REQUEST, lambda i: _request(i, "bench", RELAY_SKILL), None, plugin),
                "plugin_new_user": (subjects.SKILL_REQUEST, lambda i: _request(i, "bench", user=NEW_USER), None, plugin),
                "plugin_enriched": (subjects.SKILL_REQUEST, lambda i: _request(i, "bench", user=JOSH), None, plugin),
                "bare_relay": ("floor.request", lambda i: _request(i, "bench", RELAY_SKILL), None, floor),
                "bare_relay_acked": ("floor.request", lambda i: _request(i, "bench", RELAY_SKILL), {"acked": "1"}, floor),
            }
            cpu = dict.fromkeys(kinds, 0.0)
            sent = dict.fromkeys(kinds, 0)
            for _ in range(rounds):
                for kind, (subject, make, headers, proc) in kinds.items():
                    before = cpu_seconds(proc.pid)
                    sent[kind] += int((await open_loop(bus, rate, seconds, subject=subject, make=make,
                                                      headers=headers))["sent"])
                    cpu[kind] += cpu_seconds(proc.pid) - before
            await bus.close()
        finally:
            for proc in (plugin, floor):
                proc.terminate()
                proc.wait(timeout=60)
            server.stop()
    figures.update({f"cpu_ms_per_request_{kind}": round(1000 * cpu[kind] / max(1, sent[kind]), 3) for kind in kinds})
    figures["relay_overhead_over_bare_ms"] = round(
        figures["cpu_ms_per_request_plugin_relay_only"] - figures["cpu_ms_per_request_bare_relay"], 3)
    figures.update({"rate_rps": rate, "seconds_per_block": seconds, "rounds": rounds})
    return figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["plugin", "recall", "breakdown", "statements", "sql", "bounds", "floor"])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--evict-mb", type=int, default=0, help="breakdown: write this many MB between requests, so each "
                    "finds the caches cold, as in a process woken for it (64 is several times this machine's cache)")
    ap.add_argument("--found", action="store_true", help="breakdown, sql: questions about people the fill wrote, whose "
                    "answers memory holds (bench_pipeline._request(found=True)); without it, bench-pipeline's own")
    ap.add_argument("--blocks", type=int, default=8, help="bounds: blocks each way, alternated")
    ap.add_argument("--pyspy", action="store_true", help="plugin: sample the plugin process with py-spy; recall: "
                    "run under py-spy (figures are then not written)")
    ap.add_argument("--kinds", default="enriched,new_user,relay",
                    help="plugin: which requests to send (with --pyspy, sample only these)")
    ap.add_argument("--pyspy-format", choices=["flamegraph", "raw"], default="flamegraph",
                    help="raw: collapsed stacks (bench/profiles/plugin.collapsed.txt) for bench/stacks.py")
    args = ap.parse_args()
    if args.what == "recall":
        figures = asyncio.run(profile_recall(args.n))
    elif args.what == "breakdown":
        figures = asyncio.run(breakdown(args.n, args.evict_mb, args.found))
    elif args.what == "statements":
        figures = asyncio.run(statements(args.n))
    elif args.what == "sql":
        figures = asyncio.run(sql_costs(args.n, args.found))
    elif args.what == "bounds":
        figures = asyncio.run(bounds(args.n, args.blocks))
    elif args.what == "floor":
        figures = asyncio.run(relay_floor(rate=50.0, seconds=6.0, rounds=args.blocks))
    else:
        figures = asyncio.run(profile_plugin(args.n, args.pyspy, args.pyspy_format, tuple(args.kinds.split(","))))
    figures["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print_table(f"profile {args.what}", figures)
    if not args.pyspy:
        write_results(f"profile_{args.what}", figures, baseline="relay-only requests through the same plugin "
                      "process, alternated blocks" if args.what == "plugin" else "the same recalls with the read "
                      "not memoised, alternated blocks in one process" if args.what == "bounds"
                      else "the same hops on bare nats-py (relay_floor_server.py), blocks in turn, same run"
                      if args.what == "floor" else "none (CPU per recall)")


if __name__ == "__main__":
    main()
