"""Pipeline bench: what memory adds to a skill request, and how much load the plugin sustains.

Run: `make bench-pipeline`; QUICK=1 for a small run.

- A real nats-server, the memory plugin and a stub executor in a separate
  process, and groups pre-filled with N facts each through MemoryEngine.ingest
  (the offline extractor and the local embedding model, as in production).
- Baseline, same run: the same requests sent straight to the executor
  (`agent.skill.execute.bench`), a bare relay with no plugin in between.
- Overhead = plugin-path latency minus bare-relay latency (p50 and p99).
- The plugin runs as PLUGIN_COPIES processes (default: one per core) in one
  queue group, as production scales it; latency is measured closed-loop, one
  request at a time.
- Sustained: an open-loop load at a fixed rate (500/s) with recall on; achieved
  rate, p99, errors and how many replies went out unenriched. Capacity: the
  highest rate of a ladder the plugins kept up with (achieved >= 95% of it,
  p99 <= 250 ms) with at least 99% of replies enriched. The same ladder with
  a skill memory skips (`alert`) gives the plugins' ceiling with no recall:
  what the bus, the envelopes and the relay cost on their own.
  Soak: 80% of that capacity for 10 minutes, sampling every plugin's RSS;
  a leak shows as the slope fitted to the samples after the first fifth
  (MB a minute), which one noisy sample cannot fake as end-minus-warm can.
- At 200 requests/s (issue 25's bar): errors, the share served with memory,
  the p99 memory adds, and episodes lost: every exchange answered without an
  error must be on the episode stream (no worker consumes it here).
- CPU cost: at 100 requests/s (served in full), the CPU milliseconds a request
  costs the plugin processes (their stub executor included), nats-server and
  this client, with recall and with memory skipped; cores divided by the total
  is the rate the machine could serve with recall on, however well it queued.
  Before each step the same requests at the same rate go to the bare nats-py
  relay (`relay_floor_server.py`, no mnemobus code): its CPU a request is the
  machine's gauge, and the CPU budgets scale by it (`bench/budget.py`), since
  this machine runs the same tree up to twice as slow on some days.
- Two kinds of question. The bench's own name no person the fill wrote, so
  recall finds near misses only (the budgets were set on them and stay
  comparable); `found` questions name one it wrote, so the text searches
  match and facts are shown: latency and CPU for both, a CPU budget for each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import cpu_seconds, peak_rss_mb, percentile, print_table, quick, write_results  # noqa: E402

from mnemobus.shared.procmem import memory_mb  # noqa: E402

from mnemobus.shared import subjects  # noqa: E402
from mnemobus.bus.connection import Bus  # noqa: E402
from mnemobus.bus.server import EmbeddedNatsServer  # noqa: E402
from mnemobus.shared.config import load_settings  # noqa: E402
from mnemobus.kernel.backends import open_engine  # noqa: E402
from mnemobus.shared.envelope import EnrichedRequest, Meta, Payload, SkillRequest, Source  # noqa: E402
from mnemobus.shared.groups import GroupId  # noqa: E402
from mnemobus.store.model import Episode, episode_id_for  # noqa: E402

QUICK = quick()
FACT_TARGET = 1_000 if QUICK else 10_000
LATENCY_N = 300 if QUICK else 2_000
RATE = 500
SUSTAIN_S = 5 if QUICK else 20
SOAK_S = 10 if QUICK else 600
LADDER = (50, 100, 150, 200, 300, 400, 500)  # requests/s tried for the capacity with recall on
RELAY_LADDER = (100, 200, 300, 400, 500, 700, 1000)  # ...and for the plugin's ceiling with memory skipped
RELAY_SKILL = "alert"  # in memory.exclude_skills by default: through the plugin, no recall and no episode
STEP_S = 3 if QUICK else 8
CPU_RATE = 50 if QUICK else 100  # requests/s for the CPU cost step: well below capacity, so nothing is shed
CPU_STEP_S = 5 if QUICK else 15
COPIES = int(os.environ.get("PLUGIN_COPIES", os.cpu_count() or 1))  # plugin processes sharing the queue group
JOSH = "111"  # the bench user: discord 111 is josh, whose two groups are filled (and an old platform group, empty)
FLOOR_SUBJECT = "floor.request"  # relay_floor_server.py's request subject
NEW_USER = "999"  # nobody's identity: two groups of their own, never written to here (no worker runs)
PEOPLE = [f"Person{i}" for i in range(400)]
PROJECTS = [f"Project{i}" for i in range(300)]
TOOLS = [f"tool{i}" for i in range(200)]


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    mb = memory_mb(pid, field)
    return float("nan") if mb is None else mb


async def fill(settings, groups: list[GroupId]) -> dict[str, float]:
    """Fill each group to FACT_TARGET facts through the engine, in worker-sized batches."""
    from datetime import UTC, datetime

    engine = await open_engine(settings)
    started = time.perf_counter()
    n = facts = i = 0
    try:
        while facts < FACT_TARGET:
            batch = []
            for _ in range(16):
                person, project, tool = PEOPLE[i % len(PEOPLE)], PROJECTS[(i * 7) % len(PROJECTS)], TOOLS[(i * 13) % len(TOOLS)]
                text = f"{person}{i} works on {project}. {project} uses {tool}."
                for g in groups:
                    batch.append(Episode(id=episode_id_for(g, f"fill-{i}", "exchange"), group_id=g, content=text,
                                         role="exchange", source_message_id=f"fill-{i}", reference_time=datetime.now(UTC)))
                i += 1
            outcomes = await engine.ingest_many(batch)
            for ep, out in zip(batch, outcomes):
                if isinstance(out, BaseException):
                    raise out
                n += 1
                if ep.group_id == groups[0]:
                    facts += out.facts_added  # distinct facts: a reinforced one is not another row
    finally:
        await engine.close()
    return {"fill_episodes": n, "fill_facts_per_group": facts,
            "ingest_episodes_per_s": round(n / (time.perf_counter() - started), 1)}


def question(i: int, *, found: bool = False) -> str:
    """The bench's i-th question. It names `Person<n>`, a name no filled message holds (the fill writes
    `Person<n><i>`): recall finds near misses only, and the recalled block shows messages, no fact. `found=True`
    asks about a person the fill did write, so memory holds the answer: recall's text searches match, and facts are
    read and shown (~0.5-1 ms more in process, docs/performance.md, 2026-11-29)."""
    if found:
        j = (i * 37) % (FACT_TARGET // 2)  # a message the fill wrote: it writes at least one per two facts
        person = f"{PEOPLE[j % len(PEOPLE)]}{j}"
    else:
        person = PEOPLE[i % len(PEOPLE)]
    return f"What does {person} work on and which tool?"


def _request(i: int, agent: str, skill: str = "chat", user: str = "111", *, found: bool = False) -> bytes:
    """The bench's request, asking `question(i, found=found)`."""
    return SkillRequest(source=Source(platform="discord", user_id=user, channel_id="bench"),
                        payload=Payload(skill=skill, content=question(i, found=found),
                                        meta=Meta(agent_id=agent))).to_wire()


def _direct(i: int) -> bytes:
    req = EnrichedRequest.model_validate_json(_request(i, "bench"))
    req.original_content = req.payload.content
    return req.to_wire()


async def closed_loop(bus: Bus, subject: str, make, n: int) -> list[float]:
    out = []
    for i in range(n):
        data = make(i)
        t = time.perf_counter()
        await bus.request(subject, data, timeout_s=5)
        out.append(time.perf_counter() - t)
    return out


async def open_loop(bus: Bus, rate: float, seconds: float, pids: list[int] | None = None,
                    skill: str = "chat", user: str = "111", found: bool = False,
                    subject: str = subjects.SKILL_REQUEST, make: Callable[[int], bytes] | None = None,
                    headers: dict[str, str] | None = None) -> dict[str, float]:
    """Requests at `rate` for `seconds` (each started on time, whether or not the last was answered): latency,
    errors and the replies without memory; `pids`: their RSS sampled too. The i-th request is `make(i)`, by default
    the bench's own (`_request`) with `skill`, `user` and `found`."""
    make = make or (lambda i: _request(i, "bench", skill, user, found=found))
    lat: list[float] = []
    errors = 0
    degraded = 0  # answered, but without memory (recall timed out, failed, or the breaker was open)
    rss: list[float] = []
    anon: list[float] = []  # RssAnon: the heap, without the store file's pages the memory map brought in
    rss_at: list[float] = []  # minutes since the start, one per sample
    interval = 1 / rate
    started = time.perf_counter()

    async def one(i: int) -> None:
        nonlocal errors, degraded
        t = time.perf_counter()
        try:
            msg = await bus.request(subject, make(i), timeout_s=5, headers=headers)
            if b'"error"' in msg.data:
                errors += 1
            elif skill != RELAY_SKILL and b'"status":"enriched"' not in msg.data and (
                    user == JOSH or b'"status":"empty"' not in msg.data):  # a new user's recall finds nothing
                degraded += 1
        except Exception:
            errors += 1
        lat.append(time.perf_counter() - t)

    async with anyio.create_task_group() as tg:
        i = 0
        next_sample = started
        while (now := time.perf_counter()) - started < seconds:
            target = started + i * interval
            if now < target:
                await anyio.sleep(target - now)
            tg.start_soon(one, i)
            i += 1
            if pids and now >= next_sample:
                rss.append(sum(_rss_mb(pid) for pid in pids))  # every plugin copy together
                anon.append(sum(_rss_mb(pid, "RssAnon") for pid in pids))
                rss_at.append((now - started) / 60)
                next_sample = now + max(1.0, seconds / 60)
    elapsed = time.perf_counter() - started
    res = {"sent": i, "achieved_rps": round(len(lat) / elapsed, 1), "p50_ms": round(percentile(lat, 50) * 1000, 3),
           "p99_ms": round(percentile(lat, 99) * 1000, 3), "errors": errors,
           "unenriched": degraded}
    if rss:
        cut = len(rss) // 5  # after the first fifth: caches filled, so growth from here on is a leak
        warm = rss[cut]
        res.update(rss_start_mb=round(rss[0], 1), rss_warm_mb=round(warm, 1), rss_end_mb=round(rss[-1], 1),
                   rss_peak_mb=round(max(rss), 1), rss_growth_after_warm_mb=round(rss[-1] - warm, 1))
        if len(rss) - cut >= 3:  # end minus warm is two samples' noise; a leak is a steady slope over all of them
            slope = np.polyfit(rss_at[cut:], rss[cut:], 1)[0]
            res["rss_slope_after_warm_mb_per_min"] = round(float(slope), 2)
            # a leak is heap growth; RSS also grows as recall touches more of the memory-mapped store file
            res["anon_slope_after_warm_mb_per_min"] = round(float(np.polyfit(rss_at[cut:], anon[cut:], 1)[0]), 2)
            res["anon_end_mb"] = round(anon[-1], 1)
    return res


async def episodes_in_stream(bus: Bus) -> int:
    return (await bus.js.stream_info(subjects.EPISODE_STREAM)).state.messages


async def episodes_kept(bus: Bus, before: int, expected: int) -> dict[str, int]:
    """Every exchange answered without error must be on the episode stream (no worker runs here, so the stream
    only grows): waits up to 30 s for episodes still being confirmed or republished from the outbox."""
    deadline = time.monotonic() + 30
    while (stored := await episodes_in_stream(bus) - before) < expected and time.monotonic() < deadline:
        await anyio.sleep(0.5)
    return {"rps200_episodes_expected": expected, "rps200_episodes_on_stream": stored,
            "rps200_episodes_lost": max(0, expected - stored)}


async def capacity_of(bus: Bus, ladder: tuple[int, ...], skill: str) -> tuple[int, float]:
    """The highest rate of the ladder the plugins kept up with (>= 95% achieved, p99 <= 250 ms, < 1% failed),
    and its p99 in ms."""
    capacity, p99 = 0, float("nan")
    for rate in ladder:
        step = await open_loop(bus, rate, STEP_S, skill=skill)
        await anyio.sleep(1)  # let the backlog of a failed step drain before the next
        kept_up = step["achieved_rps"] >= 0.95 * rate and step["p99_ms"] <= 250  # no queue building up
        print(f"  {skill} at {rate}/s: {step}", file=sys.stderr)
        if not kept_up or step["unenriched"] + step["errors"] > 0.01 * max(1, step["sent"]):
            break
        capacity, p99 = rate, step["p99_ms"]
    return capacity, p99


async def cpu_cost(bus: Bus, skill: str, pids: dict[str, list[int]], user: str = JOSH,
                   found: bool = False, floor_pid: int | None = None) -> dict[str, float]:
    """CPU milliseconds a request costs each process role at a rate every request is served at.

    The throughput ceiling on a fixed number of cores is cores / (CPU per request, all roles): this is the
    figure that says how far a rate target is from the machine, whatever the queueing does.
    A `user` other than josh has nothing remembered (no worker runs here, so their groups stay empty): the
    step then costs everything memory does but the searches' finding, which is how the figures tell the
    searches' share apart. `found`: josh asks about people the fill wrote, so the searches match and facts are
    shown (`enriched_found`), the recall a user whose memory holds the answer pays.

    `floor_pid`: the bare nats-py relay (`relay_floor_server.py`, no mnemobus code) is first served the same
    requests at the same rate; its CPU a request is the machine's gauge for this step (`floor_<kind>`), and the
    plugin's figure over it (`plugin_cpu_per_floor_<kind>`) is the cost on any spell of the machine.
    """
    kind = ("relay_only" if skill == RELAY_SKILL else "new_user" if user != JOSH
            else "enriched_found" if found else "enriched")
    out: dict[str, float] = {}
    if floor_pid is not None:
        at = cpu_seconds(floor_pid)
        gauge = await open_loop(bus, CPU_RATE, CPU_STEP_S, skill=RELAY_SKILL, subject=FLOOR_SUBJECT)
        out[f"cpu_ms_per_request_floor_{kind}"] = round(
            1000 * (cpu_seconds(floor_pid) - at) / max(1, gauge["sent"] - gauge["errors"]), 3)
    before = {role: sum(cpu_seconds(p) for p in ps) for role, ps in pids.items()}
    before["bench_client"] = cpu_seconds()
    step = await open_loop(bus, CPU_RATE, CPU_STEP_S, skill=skill, user=user, found=found)
    served = max(1, step["sent"] - step["errors"] - step["unenriched"])
    used = {role: sum(cpu_seconds(p) for p in ps) - before[role] for role, ps in pids.items()}
    used["bench_client"] = cpu_seconds() - before["bench_client"]
    out.update({f"cpu_ms_per_request_{role}_{kind}": round(1000 * s / served, 3) for role, s in used.items()})
    out[f"cpu_ms_per_request_all_{kind}"] = round(1000 * sum(used.values()) / served, 3)
    if floor_pid is not None:
        out[f"plugin_cpu_per_floor_{kind}"] = round(
            out[f"cpu_ms_per_request_plugin_{kind}"] / out[f"cpu_ms_per_request_floor_{kind}"], 3)
    if step["unenriched"] or step["errors"]:
        print(f"  cpu step {kind} at {CPU_RATE}/s was not all served: {step}", file=sys.stderr)
    return out


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="mnemobus-bench-") as tmp:
        tmpd = Path(tmp)
        server = EmbeddedNatsServer(tmpd / "nats")
        server.start()
        cfg = {"nats": {"url": server.url}, "store": {"sqlite_path": str(tmpd / "m.sqlite3")},
               "memory": {"recall_deadline_ms": float(os.environ.get("RECALL_DEADLINE_MS", 150)),
                          **({"max_concurrent_recalls": int(os.environ["RECALL_SLOTS"])} if "RECALL_SLOTS" in os.environ else {})},
               "metrics": {"port": 0}, "identity": {"users_file": str(Path("workspace/users.yaml").resolve())},
               "log_level": "WARNING"}
        users = tmpd / "users.yaml"
        users.write_text("users:\n  - id: josh\n    identities:\n      discord: '111'\n")
        cfg["identity"]["users_file"] = str(users)
        (tmpd / "m.yaml").write_text(yaml.safe_dump(cfg))
        settings = load_settings(tmpd / "m.yaml")
        figures: dict[str, float] = {}
        figures.update(await fill(settings, [GroupId("user_josh"), GroupId("agent_bench__user_josh")]))
        procs = [subprocess.Popen([sys.executable, str(Path(__file__).parent / "pipeline_server.py"), str(tmpd / "m.yaml")],
                                  stdout=subprocess.PIPE, text=True) for _ in range(COPIES)]
        floor = subprocess.Popen([sys.executable, str(Path(__file__).parent / "relay_floor_server.py"), server.url or ""],
                                 stdout=subprocess.PIPE, text=True)
        try:
            for proc in (*procs, floor):
                assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
            bus = await Bus.connect(server.url or "", settings.nats, name="bench")
            await closed_loop(bus, subjects.SKILL_REQUEST, lambda i: _request(i, "bench"), 50 * COPIES)  # warm
            bare = await closed_loop(bus, subjects.skill_execute("bench"), _direct, LATENCY_N)
            full = await closed_loop(bus, subjects.SKILL_REQUEST, lambda i: _request(i, "bench"), LATENCY_N)
            answered = await closed_loop(bus, subjects.SKILL_REQUEST, lambda i: _request(i, "bench", found=True),
                                         LATENCY_N)
            probe = json.loads((await bus.request(subjects.SKILL_REQUEST, _request(1, "bench"), timeout_s=5)).data)
            probe_found = json.loads((await bus.request(subjects.SKILL_REQUEST, _request(1, "bench", found=True),
                                                        timeout_s=5)).data)
            figures.update({
                "plugin_copies": COPIES,
                "bare_relay_p50_ms": round(percentile(bare, 50) * 1000, 3),
                "bare_relay_p99_ms": round(percentile(bare, 99) * 1000, 3),
                "enriched_p50_ms": round(percentile(full, 50) * 1000, 3),
                "enriched_p99_ms": round(percentile(full, 99) * 1000, 3),
                "recall_status_sample": probe.get("memory", {}).get("status", "?"),
                "recalled_facts_sample": probe.get("memory", {}).get("facts", 0),
                "enriched_found_p50_ms": round(percentile(answered, 50) * 1000, 3),
                "enriched_found_p99_ms": round(percentile(answered, 99) * 1000, 3),
                "recalled_facts_sample_found": probe_found.get("memory", {}).get("facts", 0),
            })
            if not figures["recalled_facts_sample_found"]:
                raise SystemExit(f"a question about a person the fill wrote recalled no fact: {probe_found.get('memory')}")
            figures["added_p50_ms"] = round(figures["enriched_p50_ms"] - figures["bare_relay_p50_ms"], 3)
            figures["added_p99_ms"] = round(figures["enriched_p99_ms"] - figures["bare_relay_p99_ms"], 3)
            figures["added_found_p50_ms"] = round(figures["enriched_found_p50_ms"] - figures["bare_relay_p50_ms"], 3)
            figures["added_found_p99_ms"] = round(figures["enriched_found_p99_ms"] - figures["bare_relay_p99_ms"], 3)
            roles = {"plugin": [p.pid for p in procs], "nats_server": [server.pid or 0]}
            for skill in ("chat", RELAY_SKILL):
                figures.update(await cpu_cost(bus, skill, roles, floor_pid=floor.pid))
            figures.update(await cpu_cost(bus, "chat", roles, user=NEW_USER, floor_pid=floor.pid))
            figures.update(await cpu_cost(bus, "chat", roles, found=True, floor_pid=floor.pid))
            # the machine's gauge for the whole run: what budgets are scaled by (bench/budget.py, `gauge`)
            gauges = [v for k, v in figures.items() if k.startswith("cpu_ms_per_request_floor_")]
            figures["cpu_ms_per_request_floor"] = round(sum(gauges) / len(gauges), 3)
            figures["memory_cpu_ms_per_request"] = round(
                figures["cpu_ms_per_request_plugin_enriched"] - figures["cpu_ms_per_request_plugin_relay_only"], 3)
            # of memory's share, what finding costs: josh's two groups of 10k against a user with nothing remembered
            figures["search_cpu_ms_per_request"] = round(
                figures["cpu_ms_per_request_plugin_enriched"] - figures["cpu_ms_per_request_plugin_new_user"], 3)
            # what an answer found costs over a near miss: matching text searches, facts read and shown
            figures["found_cpu_ms_per_request_extra"] = round(
                figures["cpu_ms_per_request_plugin_enriched_found"] - figures["cpu_ms_per_request_plugin_enriched"], 3)
            figures["cpu_bound_enriched_rps"] = round((os.cpu_count() or 1) * 1000 / figures["cpu_ms_per_request_all_enriched"])
            capacity, figures["capacity_p99_ms"] = await capacity_of(bus, LADDER, "chat")
            figures["capacity_enriched_rps"] = capacity
            # issue 25's bar, whatever the capacity: at 200 requests/s, 0 errors, the share served with memory,
            # and the p99 the plugin adds (the recall deadline promises <= 150 ms)
            await anyio.sleep(settings.memory.breaker_cooldown_s + 2)
            in_stream_before = await episodes_in_stream(bus)
            await bus.request(subjects.SKILL_REQUEST, _request(2, "bench"), timeout_s=5)
            await anyio.sleep(1)  # its episodes confirmed: one request's share of the stream, measured
            groups_per_request = await episodes_in_stream(bus) - in_stream_before
            in_stream_before += groups_per_request
            at200 = await open_loop(bus, 200, STEP_S)
            figures.update({f"rps200_{k}": v for k, v in at200.items()})
            figures.update(await episodes_kept(bus, in_stream_before, (at200["sent"] - at200["errors"]) * groups_per_request))
            figures["rps200_enriched_share"] = round(1 - (at200["unenriched"] + at200["errors"]) / max(1, at200["sent"]), 3)
            figures["rps200_added_p99_ms"] = round(at200["p99_ms"] - figures["bare_relay_p99_ms"], 3)
            relay, figures["capacity_relay_only_p99_ms"] = await capacity_of(bus, RELAY_LADDER, RELAY_SKILL)
            figures["capacity_relay_only_rps"] = relay
            sustained = await open_loop(bus, RATE, SUSTAIN_S)
            figures.update({f"sustained_{k}": v for k, v in sustained.items()})
            await anyio.sleep(settings.memory.breaker_cooldown_s + 2)  # an overload may have opened the breaker
            soak_rate = max(10.0, 0.8 * capacity)
            soak = await open_loop(bus, soak_rate, SOAK_S, pids=[p.pid for p in procs])
            figures.update({f"soak_{k}": v for k, v in soak.items()})
            figures["soak_rps_target"] = soak_rate
            figures["soak_seconds"] = SOAK_S
            figures["plugin_peak_rss_mb"] = soak.get("rss_peak_mb", float("nan"))
            figures["bench_client_peak_rss_mb"] = round(peak_rss_mb(), 1)
            await bus.close()
        finally:
            for proc in (*procs, floor):
                proc.terminate()
            for proc in (*procs, floor):
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    print("pipeline server did not drain within 30 s; killed it", file=sys.stderr)
                    proc.kill()
                    proc.wait()
            server.stop()
    figures["facts_per_group"] = figures.pop("fill_facts_per_group")
    print_table(f"pipeline bench ({'QUICK' if QUICK else 'full'}; {FACT_TARGET:,} facts per group target)", figures)
    write_results("bench_pipeline", figures, baseline="bare relay: the same requests sent straight to the executor, same run")


if __name__ == "__main__":
    anyio.run(main)
