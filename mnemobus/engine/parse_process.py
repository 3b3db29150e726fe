"""The offline extractor on two cores: a batch cut into chunks of whole groups, the first parsed here, the others
in a child process (`parse_child`) one after another while this process stores the chunk before.

Why: the parse (~1.3 ms CPU an episode) and the rest of ingestion (embedding, resolution, the store's writes: ~1.4
ms) ran one after the other on one core, so the batch door could not reach 500 episodes/s (issue 36). A chunk holds
whole groups: the extractor carries the persons last named from turn to turn within a group (and reads the turns
before the batch), never across groups, so each chunk is read, resolved and linked exactly as in the whole batch.
The parse costs ~5 ms a call besides its lines, so the chunks are few (3); this process stores every chunk, so it
parses the smaller share (~20% of the text). A group's chunk changes from batch to batch with the batch's texts, so
the two processes tell each other whom their turns named: else the side a group moved to parsed its turns before
again (~0.9 of a turn an episode in bench-engine's batches, most of it here).

Bounded and failing loudly: one child, one batch's chunks at a time (a lock held only while the child works, so a
second batch in flight parses and stores its own first chunk meanwhile), every chunk under a time bound; a child
that dies, answers out of step or runs out of time is killed, counted (`failures`) and logged, and the chunks it
had not answered fail (`ParseChildFailed` in their slots: nothing of them is stored, the worker redelivers them),
while a chunk already stored was stored whole; the next batch starts a new child. Small batches (one message, a
test's few turns) and one-group batches stay in this process: the child starts with the first full batch of
several groups (or `start`). `aclose` waits for the chunks in flight, then ends the child at the end of its input.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectSendStream
from anyio.streams.buffered import BufferedByteReceiveStream

from mnemobus.engine.extract import ChunkReady, Extraction
from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.engine.frames import frame, kill_child, receive_frame
from mnemobus.engine.spare_core import SpareCoreMeter
from mnemobus.store.model import Episode

log = logging.getLogger("mnemobus.engine.parse")

#: below this many episodes a batch is parsed here: a child's hand-off costs more than half of a small parse
SPLIT_MIN = 16
#: chunks a batch is cut into: the first parsed here, the others in the child while the one before is stored
CHUNKS = 3
#: the first chunk's share of the batch: this process stores every chunk, so it parses less than the child
HERE_SHARE = 0.2
#: a job's bound, the child's start and its parser's loading (~1-2 s, far more on a loaded machine) included
JOB_TIMEOUT_S = 120.0
CLOSE_TIMEOUT_S = 10.0


class ParseChildFailed(RuntimeError):
    """The parse child died, answered out of step or did not answer in time: the batch it held is not extracted."""


def group_chunks(episodes: Sequence[Episode], n: int, first_share: float) -> list[list[int]]:
    """The batch's positions in up to `n` chunks of whole groups: the first near `first_share` of the batch's text,
    the others sharing the rest evenly, as a greedy packing gets it (heaviest group first into the chunk furthest
    below its target); each chunk in batch order, no chunk empty."""
    weight: dict[str, int] = {}
    for ep in episodes:
        weight[ep.group_id] = weight.get(ep.group_id, 0) + len(ep.content) + len(ep.response or "")
    n = max(1, min(n, len(weight)))
    total = sum(weight.values())
    targets = [total] if n == 1 else [total * first_share] + [total * (1 - first_share) / (n - 1)] * (n - 1)
    loads = [0.0] * n
    chunk_of: dict[str, int] = {}
    for group in sorted(weight, key=lambda g: -weight[g]):
        k = max(range(n), key=lambda k: targets[k] - loads[k])
        chunk_of[group] = k
        loads[k] += weight[group]
    chunks = [[i for i, ep in enumerate(episodes) if chunk_of[ep.group_id] == k] for k in range(n)]
    return [c for c in chunks if c]


class ProcessSplitExtractor:
    """`ParsedExtractor` (config `extractor: offline`) with a second core for the batch door (`parse_child: true`,
    or `auto`: only for the batches that find a core to spare, engine/spare_core.py)."""

    name = "offline"

    def __init__(self, local: ParsedExtractor | None = None, split_min: int = SPLIT_MIN, n_chunks: int = CHUNKS,
                 here_share: float = HERE_SHARE, timeout_s: float = JOB_TIMEOUT_S, auto: bool = False,
                 meter: SpareCoreMeter | None = None) -> None:
        self.local = local or ParsedExtractor()
        self.split_min = split_min
        self.n_chunks = n_chunks
        self.here_share = here_share
        self.timeout_s = timeout_s
        self._process: Process | None = None
        self._answers: BufferedByteReceiveStream | None = None
        self._lock = anyio.Lock()
        self._closed = False
        self.started = 0  # children started so far
        self.failures = 0  # jobs lost to a child that died, answered out of step or ran out of time
        self.on_failure: list[Callable[[], None]] = []  # told at each of them (the process's metrics: open_runtime)
        self.split_batches = 0  # batches parsed on two cores
        self.auto = auto  # `parse_child: auto`: each batch split only while the meter finds a core to spare
        self.meter = meter or SpareCoreMeter(own=lambda: (self.pid,) if self.pid is not None else ())

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.returncode is None else None

    def warm(self) -> None:
        self.local.warm()

    async def start(self) -> None:
        """The child started and its parser loaded now (~1-2 s CPU), not in the first large batch's time (a bench's
        timed run, a worker's first full batch)."""
        async with self._lock:
            try:
                with anyio.fail_after(self.timeout_s):
                    await self._start()
                    assert self._process is not None and self._process.stdin is not None
                    await self._process.stdin.send(frame(("warm",)))
                    answer = await self._receive()
            except BaseException:
                await self._kill()
                raise
            if answer != ("warm",):
                raise await self._failed(f"answered out of step: {str(answer)[:200]}")

    async def extract(self, episode: Episode) -> Extraction:
        return await self.local.extract(episode)

    async def extract_many(self, episodes: Sequence[Episode]) -> list[Extraction | Exception]:
        return await self.local.extract_many(episodes)

    async def extract_after(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]]
                            ) -> list[Extraction | Exception]:
        return await self.local.extract_after(episodes, previous)

    def chunks(self, episodes: Sequence[Episode], *, overlapped: bool = False) -> list[list[int]]:
        """`chunks` chunks of whole groups for a batch of `split_min` or more; else one (parsed here), as also in
        `auto` while the machine has no core to spare (the pair would then spend more CPU for nothing) or when the
        batch is `overlapped` by others of this process: the worker's overlapping batches (`batches_in_flight`)
        already put the second core to work, and there the child gained nothing (docs/performance.md) for ~300 MB
        and more CPU."""
        if len(episodes) < self.split_min or (self.auto and (overlapped or not self.meter.core_free())):
            return [list(range(len(episodes)))]
        return group_chunks(episodes, self.n_chunks, self.here_share)

    async def extract_chunks(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]],
                             chunks: Sequence[list[int]], ready: ChunkReady) -> None:
        """The first chunk parsed here, the others in the child one after another: while `ready` stores one chunk
        the child parses the next. ParseChildFailed (after the chunks that did arrive) when the child's were lost."""
        previous = list(previous) or [[] for _ in episodes]
        if len(chunks) < 2:
            for first in chunks:
                await ready(first, await self.local.extract_after([episodes[i] for i in first], [previous[i] for i in first]))
            return
        first, rest = chunks[0], list(chunks[1:])
        send, receive = anyio.create_memory_object_stream[tuple[list[int], list[Extraction | Exception]]](len(rest))
        failed: list[Exception] = []

        async def from_child() -> None:
            async with send:
                try:
                    async with self._lock:  # one batch at a time on the child; a second batch in flight (the
                        # worker's batches_in_flight) parses and stores its first chunk meanwhile
                        await self._jobs(episodes, previous, rest, send)
                except ParseChildFailed as exc:
                    failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(from_child)
            try:
                here = await self.local.extract_after([episodes[i] for i in first], [previous[i] for i in first])
            except Exception as exc:  # noqa: BLE001 - raised below, outside the task group (not as a group)
                failed.insert(0, exc)
                tg.cancel_scope.cancel()  # the child's chunks are not wanted: this batch fails whole
            else:
                await ready(first, here)
                async with receive:
                    async for positions, answer in receive:
                        await ready(positions, answer)
        self.split_batches += 1
        if failed:
            raise failed[0]

    async def _jobs(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]], chunks: list[list[int]],
                    send: MemoryObjectSendStream[tuple[list[int], list[Extraction | Exception]]]) -> None:
        """Each chunk sent and its answer passed on, one at a time (the next is sent as soon as an answer is in, so
        the child waits only for a frame; one in flight: neither side ever blocks writing while the other writes
        too, whatever the texts' size). Out of step, dead or late: ParseChildFailed."""
        try:
            with anyio.fail_after(self.timeout_s):
                await self._start()
                assert self._process is not None and self._process.stdin is not None
                for chunk in chunks:
                    known = self.local.named(turn.id for i in chunk for turn in previous[i])
                    await self._process.stdin.send(
                        frame(("extract", [episodes[i] for i in chunk], [previous[i] for i in chunk], known)))
                    answer = await self._receive()
                    if (not isinstance(answer, tuple) or len(answer) != 3 or answer[0] != "extracted"
                            or len(answer[1]) != len(chunk) or not isinstance(answer[2], dict)):
                        raise await self._failed(f"answered out of step: {str(answer)[:200]}")
                    self.local.learn_named(answer[2])  # the child's turns, for the batches after (whichever side)
                    await send.send((chunk, list(answer[1])))
        except TimeoutError as exc:
            raise await self._failed(f"did not answer within {self.timeout_s:g} s") from exc
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError,
                OSError) as exc:
            raise await self._failed(f"died ({type(exc).__name__})") from exc
        except BaseException:  # cancelled: the pipe is out of step, the job abandoned
            await self._kill()
            raise

    async def _failed(self, what: str) -> ParseChildFailed:
        pid = self._process.pid if self._process is not None else None
        code = self._process.returncode if self._process is not None else None
        await self._kill()
        self.failures += 1
        for told in self.on_failure:
            told()
        message = f"the parse child (pid {pid}, exit code {code}) {what}; the chunks it had not answered are not extracted"
        log.error(message)
        return ParseChildFailed(message)

    async def aclose(self) -> None:
        """Shutdown drains: the job in flight finishes, then the child ends at the end of its input."""
        async with self._lock:
            self._closed = True
            process, self._process, self._answers = self._process, None, None
            if process is None or process.returncode is not None:
                return
            with anyio.CancelScope(shield=True):
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.move_on_after(CLOSE_TIMEOUT_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()

    async def _start(self) -> None:
        if self.pid is not None:
            return
        if self._closed:  # a batch that was waiting for the child when the engine closed: no new child after close
            raise ParseChildFailed("the parse child was closed; the chunks it had not answered are not extracted")
        self._process = await anyio.open_process([sys.executable, "-m", "mnemobus.engine.parse_child"], stderr=None)
        assert self._process.stdout is not None
        self._answers = BufferedByteReceiveStream(self._process.stdout)
        self.started += 1
        log.info("parse child started (pid %d)", self._process.pid)

    async def _receive(self) -> object:
        assert self._answers is not None
        return await receive_frame(self._answers)

    async def _kill(self) -> None:
        process, self._process, self._answers = self._process, None, None
        await kill_child(process)
