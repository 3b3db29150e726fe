"""Reads issued in one event-loop turn share one round trip to Neo4j (see `CoalescedReads._shared_read`)."""

from __future__ import annotations

import asyncio
import re
import time
from functools import lru_cache
from collections.abc import Sequence
from typing import Any

from neo4j import READ_ACCESS

from mnemobus.shared.errors import StoreUnavailable
from mnemobus.store.neo4j.cypher import RETRYABLE, TRANSIENT
from mnemobus.store.neo4j.rows import record_dicts


_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# LIMIT and SKIP take only parameters and literals, never a variable: such a parameter stays one, shared by the
# copies that run in one part (copies asking other values are parts apart)
_CLAUSE_PARAM = re.compile(r"\b(?:LIMIT|SKIP)\s+\$([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
# what keeps copies of a read from running once per row of a list: a subquery of its own (it would have to import
# the row) or a LIMIT/SKIP of anything but a parameter or a number
_NOT_PER_ROW = re.compile(r"\bUNION\b|\bCALL\s*\{|\b(?:LIMIT|SKIP)\s+(?![$0-9])", re.IGNORECASE)
MAX_COALESCED = 16  # distinct reads per combined statement
MAX_PER_ROW = 64  # copies of one read, each with its own parameters, in one statement
LANE_ANN = 1  # HNSW queries, each sent alone: one costs more than all the other reads of a recall together

Read = tuple[str, tuple[str, ...], dict[str, Any]]  # query text, its columns, its parameters
Place = tuple[str, int | None]  # a read's rows in a combined answer: the column, and its row there if it was one of many
Kind = tuple[str, str]  # a read's text, and the values of its LIMIT/SKIP parameters (repr)


@lru_cache(maxsize=512)  # the store's read texts are constants: each is looked at once, not at every read
def runs_per_row(query: str) -> bool:
    """Whether copies of `query` can share one statement as rows of a list (see `combine_reads`)."""
    return _NOT_PER_ROW.search(query) is None


@lru_cache(maxsize=512)
def clause_params(query: str) -> tuple[str, ...]:
    """The parameters `query` gives a LIMIT or SKIP, which stay parameters in a per-row part."""
    return tuple(_CLAUSE_PARAM.findall(query))


def kind_of(query: str, params: dict[str, Any]) -> Kind:
    """Reads of one kind can run as one part of a combined statement (see `combine_reads`)."""
    return query, repr([params.get(name) for name in clause_params(query)])


def _kinds(kinds: Sequence[Kind]) -> dict[Kind, list[int]]:
    found: dict[Kind, list[int]] = {}
    for i, kind in enumerate(kinds):
        found.setdefault(kind, []).append(i)
    return found


def statements_for(kinds: Sequence[Kind]) -> list[list[int]]:
    """The reads (by index) each combined statement carries: every copy of a kind that `runs_per_row` in one
    statement (up to MAX_PER_ROW), a kind that cannot one copy per statement, at most MAX_COALESCED kinds in each."""
    waves: list[list[list[int]]] = []  # wave w: the w-th share of each kind
    for kind, copies in _kinds(kinds).items():
        step = MAX_PER_ROW if runs_per_row(kind[0]) else 1
        for w, start in enumerate(range(0, len(copies), step)):
            if w == len(waves):
                waves.append([])
            waves[w].append(copies[start : start + step])
    return [[i for share in wave[k : k + MAX_COALESCED] for i in share]
            for wave in waves for k in range(0, len(wave), MAX_COALESCED)]


def combine_reads(reads: Sequence[Read]) -> tuple[str, dict[str, Any], list[Place]]:
    """Several constant read queries as one statement returning one row; where each read's rows are in it.

    The statement's text depends on which kinds of read it carries, not on how many copies of each nor on their
    order, so the server plans it once: copies of a kind that `runs_per_row` become one part that runs the read
    once per row of a list of parameter maps (`$b<j>`, the read's `$x` becoming `mb_p.x`, its LIMIT/SKIP
    parameters kept as `$b<j>_x`) and collects each copy's rows apart; a read alone keeps its parameters, renamed
    b<j>_<name> so the reads cannot clash; the parts go in the order of their kinds. Each part collects its rows
    inside a subquery of its own (aggregating without grouping keys, so an empty answer still yields one row, []).
    """
    kinds = _kinds([kind_of(query, params) for query, _, params in reads])
    parts: list[str] = []
    params: dict[str, Any] = {}
    places: list[Place] = [("", None)] * len(reads)
    j = 0
    for kind in sorted(kinds):
        query, copies = kind[0], kinds[kind]
        row = "{" + ", ".join(f"{c}: {c}" for c in reads[copies[0]][1]) + "}"
        if len(copies) > 1 and runs_per_row(query):
            shared = set(clause_params(query))
            inner = _PARAM.sub(lambda m, j=j: f"$b{j}_{m.group(1)}" if m.group(1) in shared else f"mb_p.{m.group(1)}",
                               query)
            parts.append(f"CALL {{ UNWIND range(0, size($b{j}) - 1) AS mb_i CALL {{ WITH mb_i WITH $b{j}[mb_i] AS mb_p "
                         f"CALL {{ WITH mb_p {inner} }} RETURN collect({row}) AS mb_rows }} "
                         f"RETURN collect([mb_i, mb_rows]) AS mb_b{j} }}")
            params[f"b{j}"] = [{k: v for k, v in reads[i][2].items() if k not in shared} for i in copies]
            params.update({f"b{j}_{k}": v for k, v in reads[copies[0]][2].items() if k in shared})
            for n, i in enumerate(copies):
                places[i] = (f"mb_b{j}", n)
            j += 1
            continue
        for i in copies:  # alone, or a kind that cannot run per row (statements_for never sends two of those)
            text = _PARAM.sub(lambda m, j=j: f"$b{j}_{m.group(1)}", query)
            params.update({f"b{j}_{k}": v for k, v in reads[i][2].items()})
            parts.append(f"CALL {{ CALL {{ {text} }} RETURN collect({row}) AS mb_b{j} }}")
            places[i] = (f"mb_b{j}", None)
            j += 1
    return " ".join(parts) + " RETURN " + ", ".join(f"mb_b{n}" for n in range(j)), params, places


def rows_at(answer: dict[str, Any], place: Place) -> list[Any]:
    """One read's rows out of a combined answer (see `combine_reads`)."""
    column, n = place
    if n is None:
        return answer[column]
    return dict(answer[column])[n]




class CoalescedReads:
    """The Neo4j store's reads: one auto-commit query each, or queued to share a statement with their neighbours."""

    async def _read_rows(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """A read in one auto-commit transaction: one round trip (a managed transaction needs two).

        Reads are idempotent, so a transient failure (leader switch, dropped
        connection) is retried here with backoff for up to max_retry_time_s.
        """
        deadline = time.monotonic() + self.max_retry_time_s
        delay = 0.05
        while True:
            try:
                async with self._open_driver().session(database=self.database, default_access_mode=READ_ACCESS) as s:
                    result = await s.run(query, params)
                    return await record_dicts(result)
            except RETRYABLE as exc:
                if time.monotonic() + delay > deadline:
                    raise StoreUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}") from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            except TRANSIENT as exc:
                raise StoreUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}") from exc

    async def _shared_read(self, query: str, cols: tuple[str, ...], *, lane: int = 0, **params: Any) -> list[dict[str, Any]]:
        """A read that may share its round trip with the other reads issued in the same event-loop turn.

        Recall asks for up to six candidate lists at once, then for facts and episodes at once.
        Each Bolt round trip costs 1-2 ms of driver work on loopback (several under load, far more
        across a network), and two cores cannot overlap much of it, so reads queued in one turn
        are sent as one statement: each becomes a `CALL { ... }` whose rows are collected into one
        list column (`cols` names the query's columns). The query text is constant; the combined
        statement's text depends only on which reads it carries (`combine_reads`), so the server plans
        few of them. When the combined statement fails for a reason other
        than a transient one, each read is retried on its own so one bad read fails only itself.
        Reads of different `lane`s go in separate statements, sent side by side, and LANE_ANN reads
        each alone: the server runs one statement on one thread, and an HNSW query costs more than
        all the other reads of a recall together, so on its own it overlaps them.
        """
        return await self._enqueue(query, cols, lane, params)

    def _enqueue(self, query: str, cols: tuple[str, ...], lane: int, params: dict[str, Any]) -> asyncio.Future[Any]:
        """`_shared_read` without the wait: the future of the read's rows, queued now (so reads may share it, see `_group_version`)."""
        loop = asyncio.get_running_loop()
        if not self.coalesce_reads:
            return asyncio.ensure_future(self._read_rows(query, **params))
        fut: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
        self._queued.append((query, cols, params, fut, lane if self.read_lanes else 0))
        if len(self._queued) == 1:
            # runs after every task already scheduled for this turn: recall's sibling tasks enqueue first
            loop.call_soon(self._send_queued)
        return fut

    def _send_queued(self) -> None:
        queued, self._queued = self._queued, []
        self._version_reads.clear()  # sent: a read issued from now on must ask again
        lanes: dict[int, list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any]]]] = {}
        for query, cols, params, fut, lane in queued:
            if not fut.done():  # a cancelled caller no longer wants its rows
                lanes.setdefault(lane, []).append((query, cols, params, fut))
        for lane, batch in lanes.items():
            if lane == LANE_ANN:
                shares = [[i] for i in range(len(batch))]
            else:
                shares = statements_for([kind_of(query, params) for query, _, params, _ in batch])
            for share in shares:
                task = asyncio.get_running_loop().create_task(self._run_batch([batch[i] for i in share]))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _run_batch(self, batch: list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any]]]) -> None:
        try:
            await self._answer_batch(batch)
        finally:  # cancelled (the store is closing) or failed unexpectedly: no caller may wait forever
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(StoreUnavailable("the read was abandoned: the Neo4j store is closing"))

    async def _answer_batch(self, batch: list[tuple[str, tuple[str, ...], dict[str, Any], asyncio.Future[Any]]]) -> None:
        def settle(fut: asyncio.Future[Any], result: Any = None, exc: BaseException | None = None) -> None:
            if fut.done():
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(result)

        # even a read alone is sent combined: its rows come back collected in one record, and each record
        # costs the driver ~0.15 ms (30 fact rows: 7 ms as records, 2.6 ms as one list)
        text, merged, places = combine_reads([(q, c, p) for q, c, p, _ in batch])
        try:
            rows = await self._read_rows(text, **merged)
        except StoreUnavailable as exc:
            for *_, fut in batch:
                settle(fut, exc=StoreUnavailable(str(exc)))
            return
        except Exception as err:  # noqa: BLE001 - one read's own error: each read alone, so only it fails
            if len(batch) == 1:
                settle(batch[0][3], exc=err)
                return
            for query, _, params, fut in batch:
                try:
                    settle(fut, await self._read_rows(query, **params))
                except Exception as exc:  # noqa: BLE001
                    settle(fut, exc=exc)
            return
        if len(rows) != 1:  # cannot happen (every part yields exactly one row); never leave a caller waiting
            for *_, fut in batch:
                settle(fut, exc=StoreUnavailable(f"Neo4j answered a combined read with {len(rows)} rows"))
            return
        for place, (*_, fut) in zip(places, batch):
            settle(fut, rows_at(rows[0], place))

