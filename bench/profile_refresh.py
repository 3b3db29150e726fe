"""Where the worker's process spends a community refresh: per step, its wall time, this process's CPU (every
thread) and how long the event loop was held (the longest stall and the stalls' sum, seen by a task that asks to
wake every 2 ms). Recall beside a refresh waits behind exactly these stalls (issue 39's p99 bar).

Usage: `.venv/bin/python bench/profile_refresh.py [FACTS] [process|thread]` (default 50,000 facts in one group,
bench-lifecycle's generator; the file is kept as /tmp/profile-refresh-<FACTS>.sqlite3 between runs). A first
refresh (every community summarised) and a second one (an unchanged graph) are profiled. Steps nest: a step's
time includes the steps inside it.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_lifecycle import SETTINGS, load  # noqa: E402

from mnemobus.engine.communities import CommunityRefresher  # noqa: E402
from mnemobus.engine.embed import HashEmbedder  # noqa: E402
from mnemobus.shared.groups import GroupId  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

TICK_S = 0.002
STORE_STEPS = ("active_edges", "node_keys", "communities", "get_entities", "get_facts", "write_communities")


class Steps:
    def __init__(self) -> None:
        self.current = "other"
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.stall_max: dict[str, float] = defaultdict(float)
        self.stall_sum: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        async def timed(*a: Any, **kw: Any) -> Any:
            outer, self.current = self.current, name
            t, c = time.perf_counter(), time.process_time()
            try:
                return await fn(*a, **kw)
            finally:
                self.wall[name] += time.perf_counter() - t
                self.cpu[name] += time.process_time() - c
                self.current = outer
        return timed

    async def watch(self) -> None:
        while True:
            t = time.perf_counter()
            await anyio.sleep(TICK_S)
            stall = time.perf_counter() - t - TICK_S
            if stall > 0.001:
                self.stall_max[self.current] = max(self.stall_max[self.current], stall)
                self.stall_sum[self.current] += stall

    def table(self) -> None:
        print(f"{'step':34} {'wall s':>7} {'cpu s':>7} {'stall max ms':>13} {'stalls sum ms':>14}")
        for name in sorted(set(self.wall) | set(self.stall_sum), key=lambda n: -self.wall.get(n, 0)):
            print(f"{name:34} {self.wall.get(name, 0):7.2f} {self.cpu.get(name, 0):7.2f} "
                  f"{self.stall_max.get(name, 0) * 1000:13.1f} {self.stall_sum.get(name, 0) * 1000:14.1f}")


class Store:
    """The store with its community reads and writes timed; everything else passed through."""

    def __init__(self, store: SqliteStore, steps: Steps) -> None:
        self._store = store
        for name in STORE_STEPS:
            if hasattr(store, name):  # node_keys: not in a store from before it
                setattr(self, name, steps.wrap(f"store.{name}", getattr(store, name)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def profile(path: Path, group: GroupId, mode: str) -> None:
    store = SqliteStore(path)
    await store.open()
    stale = [k.id for k in await store.communities(group)]
    await store.write_communities(group, [], stale, datetime.now(UTC))  # the first refresh summarises everything
    refresher = CommunityRefresher(store, HashEmbedder(), settings=replace(SETTINGS, propagation=mode))
    for label in ("first", "second"):
        steps = Steps()
        refresher.store = refresher.communities = Store(store, steps)  # type: ignore[assignment]
        if mode == "process":
            from mnemobus.engine.propagation_process import ProcessPropagator
            refresher.propagator = refresher.propagator or ProcessPropagator()
            refresher.propagator.run = steps.wrap("propagation (parent side)",  # type: ignore[method-assign]
                                                  type(refresher.propagator).run.__get__(refresher.propagator))
        else:
            refresher._in_thread = steps.wrap("propagation (thread)",  # type: ignore[method-assign]
                                              type(refresher)._in_thread.__get__(refresher))
        refresher._summarised = steps.wrap("summaries (rows, text, vectors)",  # type: ignore[method-assign]
                                           type(refresher)._summarised.__get__(refresher))
        t, c = time.perf_counter(), time.process_time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(steps.watch)
            outcome = await refresher.refresh(group)
            tg.cancel_scope.cancel()
        print(f"\n{label} refresh ({mode}): {outcome.communities} communities, {outcome.summaries} summarised, "
              f"{time.perf_counter() - t:.2f} s wall, {time.process_time() - c:.2f} s CPU in this process")
        steps.table()
    await refresher.aclose()
    await store.close()


def main() -> None:
    facts = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    mode = sys.argv[2] if len(sys.argv) > 2 else "process"
    path = Path(f"/tmp/profile-refresh-{facts}.sqlite3")
    if not path.exists():
        load(path, facts, 1)
    anyio.run(profile, path, GroupId("user_life0"), mode)


if __name__ == "__main__":
    main()
