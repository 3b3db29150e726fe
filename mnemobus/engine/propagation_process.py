"""Label propagation in one child process, started lazily: the refresh's pure-CPU steps off the GIL.

Why: in a thread of the worker's process, propagation over a 200k-fact group held the GIL for seconds and recall
beside it had a p99 4.6x its idle p99 (bench-lifecycle). The child (`propagation_child`) builds the graph,
propagates and picks each community's central members and facts; this side only streams edges in chunks and reads
the answer back a few hundred communities at a time, so no single step holds this process's loop for long.

Bounded: one child, one job at a time (a lock); the child keeps a sliced run's state between slices and the
time bound is the child's own. Cancellable: a cancelled wait kills the child (its jobs go with it) and the next
job starts a new one, which answers "missing" for a run it never saw, so the caller's edges are sent again.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

import numpy as np

from mnemobus.engine.community_summary import Sketch
from mnemobus.engine.embedders import EmbedderSpec
from mnemobus.engine.label_propagation import EdgeLike, Picked, triples
from mnemobus.engine.frames import frame, kill_child, receive_frame

log = logging.getLogger("mnemobus.engine.communities")
SEND_CHUNK = 5000  # edges per frame sent to the child
ANSWER_GRACE_S = 60.0  # past its budget, the longest a child may take to answer (building a huge graph) before it is killed
SUMMARY_S = 0.05  # per summary asked for, on top of the grace: the longest its text and vector may take


class ProcessPropagator:
    def __init__(self, nice: int = 0) -> None:
        self.nice = nice  # the child's niceness: upkeep yields the CPU to recall when cores are short
        self._process: Process | None = None
        self._answers: BufferedByteReceiveStream | None = None
        self._lock = anyio.Lock()
        self.started = 0  # children started so far (a cancelled job kills its child)
        self._forgotten: list[str] = []

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.returncode is None else None

    async def run(self, key: str, group_id: str, edges: Sequence[EdgeLike], keys: Mapping[str, str], budget_s: float,
                  max_iterations: int, members: int, facts: int) -> list[Picked] | None:
        """The run's communities when propagation finished within `budget_s`, None when it was sliced (the
        child keeps its state for the next call with the same key)."""
        async with self._job(budget_s + ANSWER_GRACE_S):
            while self._forgotten:
                await self._send(("forget", self._forgotten.pop(), None))
            answer = await self._ask(("run", key, group_id, budget_s, max_iterations, members, facts))
            if answer == ("missing",):
                await self._send_edges(key, edges, keys)
                answer = await self._ask(("run", key, group_id, budget_s, max_iterations, members, facts))
            if answer == ("sliced",):
                return None
            kind, parts = answer  # type: ignore[misc]
            if kind != "found":
                raise RuntimeError(f"propagation child answered {answer!r}")
            picked: list[Picked] = []
            for _ in range(parts):
                picked.extend((await self._receive())[1])  # type: ignore[index]
            return picked

    async def summaries(self, spec: EmbedderSpec | None, items: Sequence[Sketch | str]
                        ) -> tuple[list[str], np.ndarray | None]:
        """Each item's summary text (a Sketch made into the offline text, a string kept) and, with an embedder
        spec, the texts' vectors (rows in order), made in the child."""
        async with self._job(ANSWER_GRACE_S + SUMMARY_S * len(items)):
            kind, parts = await self._ask(("summaries", "", spec, list(items)))  # type: ignore[misc]
            if kind != "summaries":
                raise RuntimeError(f"propagation child answered {kind!r} to summaries")
            texts: list[str] = []
            vectors: list[np.ndarray] = []
            for _ in range(parts):
                _, part, part_vectors = await self._receive()  # type: ignore[misc]
                texts.extend(part)
                if part_vectors is not None:
                    vectors.append(part_vectors)
            if spec is None:
                return texts, None
            return texts, np.concatenate(vectors) if vectors else np.zeros((0, 0), np.float32)

    @asynccontextmanager
    async def _job(self, timeout_s: float) -> AsyncIterator[None]:
        """One job at a time on a started child; a job cancelled, failed or out of time kills the child (the
        pipe is out of step, the job abandoned)."""
        async with self._lock:
            try:
                with anyio.fail_after(timeout_s):
                    await self._start()
                    yield
            except BaseException:
                await self._kill("a job was cancelled, failed or timed out")
                raise

    def forget(self, key: str) -> None:
        """Drop a sliced run the caller gave up on (the child would otherwise keep its state); told to the child
        with its next job, so a caller unwinding from a cancel never waits for the lock."""
        self._forgotten.append(key)

    async def aclose(self) -> None:
        async with self._lock:
            await self._kill("its owner closed")

    async def _start(self) -> None:
        if self.pid is not None:
            return
        self._process = await anyio.open_process(
            [sys.executable, "-m", "mnemobus.engine.propagation_child", "--nice", str(self.nice)], stderr=None)
        assert self._process.stdout is not None
        self._answers = BufferedByteReceiveStream(self._process.stdout)
        self.started += 1
        log.info("label propagation child started (pid %d)", self._process.pid)

    async def _send_edges(self, key: str, edges: Sequence[EdgeLike], keys: Mapping[str, str]) -> None:
        await self._send(("edges", key, []))  # an empty group still has a run
        for i in range(0, len(edges), SEND_CHUNK):
            await self._send(("edges", key, triples(edges[i:i + SEND_CHUNK])))
            await anyio.sleep(0)  # one chunk's pickling, then the loop's other tasks
        items = list(keys.items())
        for i in range(0, len(items), SEND_CHUNK):
            await self._send(("keys", key, dict(items[i:i + SEND_CHUNK])))
            await anyio.sleep(0)

    async def _ask(self, message: tuple) -> object:
        await self._send(message)
        return await self._receive()

    async def _send(self, message: tuple) -> None:
        assert self._process is not None and self._process.stdin is not None
        await self._process.stdin.send(frame(message))

    async def _receive(self) -> object:
        assert self._answers is not None
        return await receive_frame(self._answers)

    async def _kill(self, why: str) -> None:
        process, self._process, self._answers = self._process, None, None
        if await kill_child(process):
            log.info("label propagation child %d killed (%s)", process.pid, why)


