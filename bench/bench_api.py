"""Memory API bench: /search p50/p99 over HTTP at 100k facts, and the same queries over NATS, in one run.

Run: `make bench-api` (or `.venv/bin/python bench/bench_api.py`); QUICK=1 for a small run.

- 100k facts in one group are bulk-loaded into a SQLite file (bench_engine's
  loader: random unit vectors, resolution bypassed), then the api role runs
  on an embedded nats-server with the hashing query embedder, as bench_engine
  measures recall.
- Four paths, same queries, one at a time (latency, not throughput):
  `engine.recall` in process (the floor), POST /search over HTTP (httpx,
  keep-alive), `memory.api.search` request-reply over NATS, and the MCP
  tool `search_memory` over streamable HTTP (the MCP SDK's own client, one
  session).
- The group's vector index is built first (the bench waits, figure
  `index_build_wait`), so all three paths measure the indexed search.
- The difference between a transport and the floor is what the API costs.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_engine import NOW, VOCAB, bulk_load  # noqa: E402
from common import peak_rss_mb, print_table, quick, summary_ms, write_results  # noqa: E402

from mnemobus.shared import subjects  # noqa: E402
from mnemobus.api.mcp_door import EXTRA_MCP_URL, run_mcp_http  # noqa: E402
from mnemobus.api.service import EXTRA_URL, run_api  # noqa: E402
from mnemobus.shared.config import ApiSettings  # noqa: E402
from mnemobus.kernel.app import open_runtime  # noqa: E402
from mnemobus.bus.server import EmbeddedNatsServer  # noqa: E402
from mnemobus.shared.config import Settings  # noqa: E402
from mnemobus.store.model import RecallQuery  # noqa: E402
from mnemobus.store.sqlite import SqliteStore  # noqa: E402

RNG = random.Random(11)
MCP_TOKEN = "bench-token-0123456789"


async def main() -> None:
    logging.basicConfig(level=logging.WARNING)  # before the MCP SDK would set up its own, at INFO
    total = 10_000 if quick() else 100_000
    n = 200 if quick() else 1000
    label = f"{total // 1000}k"
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-api-") as tmp:
        root = Path(tmp)
        db = root / "api.sqlite3"
        store = SqliteStore(db)
        await store.open()
        t = time.perf_counter()
        [(group, names)] = await asyncio.to_thread(bulk_load, store, total, 1)
        figures[f"load_{label}_s"] = round(time.perf_counter() - t, 1)
        await store.close()
        server = EmbeddedNatsServer(root / "nats")
        await server.start_async()
        try:
            settings = Settings(nats={"url": server.url}, store={"backend": "sqlite", "sqlite_path": db},
                                memory={"embedding": {"provider": "hash"}}, metrics={"port": 0},
                                mcp={"port": 0, "clients": [{"name": "bench", "token": MCP_TOKEN}]},
                                identity={"users_file": root / "users.yaml"})
            queries = [f"what about {RNG.choice(names)} and {RNG.choice(VOCAB)}?" for _ in range(n)]
            async with open_runtime(settings) as rt:
                async with anyio.create_task_group() as tg:
                    await tg.start(functools.partial(run_api, rt, api=ApiSettings(port=0)))
                    await tg.start(run_mcp_http, rt)
                    await measure(rt, group, queries, figures, label)
                    rt.stop.set()
        finally:
            await anyio.to_thread.run_sync(server.stop)
    figures["peak_rss_mb"] = round(peak_rss_mb(), 1)
    print_table(f"memory API search, {total:,} facts, {n} sequential queries", figures)
    write_results("bench_api", figures, baseline=f"engine.recall in process on the same {label} facts")


async def measure(rt, group: str, queries: list[str], figures: dict[str, float], label: str) -> None:  # type: ignore[no-untyped-def]
    bodies = [{"group_ids": [group], "query": q, "max_facts": 10} for q in queries]
    async with httpx.AsyncClient(base_url=rt.extra[EXTRA_URL], timeout=30) as http:
        for b in bodies[:20]:  # warm the page cache, the vector matrix and the connection
            await rt.engine.recall(RecallQuery(b["query"], (group,), max_facts=10, max_episodes=0))
            (await http.post("/search", json=b)).raise_for_status()
            await rt.bus.request(subjects.api("search"), json.dumps(b).encode(), 30)
        # a group above the index threshold gets its IVF index built in the background on first use; measuring
        # before it is done ran the first path (the in-process floor) against the build and reported it slowest
        t = time.perf_counter()
        await anyio.to_thread.run_sync(rt.engine.store.vectors.wait_for_indexes)
        figures[f"index_build_wait_{label}_s"] = round(time.perf_counter() - t, 1)

        async def engine_once(b: dict) -> None:
            await rt.engine.recall(RecallQuery(b["query"], (group,), max_facts=10, max_episodes=0))

        async def http_once(b: dict) -> None:
            r = await http.post("/search", json=b)
            assert r.status_code == 200 and r.json()["facts"], r.text

        async def nats_once(b: dict) -> None:
            msg = await rt.bus.request(subjects.api("search"), json.dumps(b).encode(), 30)
            assert not (msg.headers or {}).get("Nats-Service-Error"), msg.headers
            assert json.loads(msg.data)["facts"]

        mcp_http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {MCP_TOKEN}"}, timeout=30)
        async with Client(streamable_http_client(rt.extra[EXTRA_MCP_URL], http_client=mcp_http)) as mcp:

            async def mcp_once(b: dict) -> None:
                r = await mcp.call_tool("search_memory", {"query": b["query"], "group_ids": b["group_ids"],
                                                          "max_results": 10, "include_messages": False})
                assert not r.is_error and r.structured_content["facts"], r.content

            for b in bodies[:20]:
                await mcp_once(b)
            for name, once in (("engine", engine_once), ("http", http_once), ("nats", nats_once), ("mcp", mcp_once)):
                lat = []
                for b in bodies:
                    t = time.perf_counter()
                    await once(b)
                    lat.append(time.perf_counter() - t)
                s = summary_ms(lat)
                figures[f"search_{label}_{name}_p50_ms"] = s["p50_ms"]
                figures[f"search_{label}_{name}_p99_ms"] = s["p99_ms"]


if __name__ == "__main__":
    asyncio.run(main())
