"""Retrieval counts: counted in process, written behind the request path, and shown with the pending ones."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from neo4j import unit_of_work
from neo4j import exceptions as nx

from mnemobus.shared.errors import StoreUnavailable
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Fact
from mnemobus.store.neo4j.cypher import COUNT_RETRIEVALS, RESET_RETRIEVALS
from mnemobus.store.neo4j.rows import run_rows
from mnemobus.store.neo4j.tuning import COUNT_ANSWER_WAIT_S, COUNTED_READS, RETRIEVAL_BACKLOG, RETRIEVAL_FLUSH_S, RETRIEVAL_WRITE_TIMEOUT_S


class Retrievals:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def mark_retrieved(self, group_id: GroupId, fact_ids: Sequence[str]) -> None:
        """Counted in memory and written in one statement within RETRIEVAL_FLUSH_S: recall never waits on a write.

        Reads through this store add the counts not yet written (as the embedded store does);
        other processes see them once written. close() writes what is left.
        """
        for fid in fact_ids:
            key = (group_id, fid)
            self._retrievals[key] = self._retrievals.get(key, 0) + 1
        if not self._retrievals or self._driver is None:
            return
        if self._retrieval_task is None or self._retrieval_task.done():
            self._retrieval_task = asyncio.get_running_loop().create_task(self._write_retrievals_later())

    async def reset_retrieval_counts(self, group_id: GroupId) -> None:
        await self.flush_retrievals()
        with self._committing([group_id]):
            await self._write(lambda tx: run_rows(tx, RESET_RETRIEVALS, {"g": group_id, "groups": [group_id]}))

    async def _write_retrievals_later(self) -> None:
        deadline = time.monotonic() + RETRIEVAL_FLUSH_S
        while self._retrievals and self._driver is not None:
            while len(self._retrievals) < RETRIEVAL_BACKLOG and time.monotonic() < deadline:
                await asyncio.sleep(min(0.1, max(deadline - time.monotonic(), 0.0)))
            try:
                await self.flush_retrievals()
            except StoreUnavailable:
                pass  # kept (or dropped when the outcome is unknown); tried again after another wait
            deadline = time.monotonic() + RETRIEVAL_FLUSH_S

    async def flush_retrievals(self) -> None:
        """Write the retrieval counts held in memory, in one transaction.

        A failure the server certainly did not commit puts the counts back to be written later;
        a commit whose outcome is unknown drops them (one retrieval lost rather than counted twice).
        """
        pending, self._retrievals = self._retrievals, {}
        if not pending:
            return
        rows = [{"g": g, "id": fid, "n": n} for (g, fid), n in pending.items()]
        groups = sorted({g for g, _ in pending})
        answered = asyncio.Event()
        self._counting.update((g, answered) for g in groups)
        self._count_writes += 1
        sent = time.monotonic()
        try:
            got = await self._write(unit_of_work(timeout=RETRIEVAL_WRITE_TIMEOUT_S)(
                lambda tx: run_rows(tx, COUNT_RETRIEVALS, {"rows": rows, "groups": groups})))
            self._own_counts_written(got[0]["vers"], got[0]["counts"], sent)
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, nx.IncompleteCommit):
                for key, n in pending.items():
                    self._retrievals[key] = self._retrievals.get(key, 0) + n
            raise
        finally:
            self._count_writes += 1
            answered.set()
            for g in groups:
                if self._counting.get(g) is answered:
                    del self._counting[g]

    def _own_counts_written(self, vers: list[dict[str, Any]], counts: list[dict[str, Any]], sent: float) -> None:
        """Counts this process just wrote go into its mirrors directly when they were current before the write.

        A mirror at version v-1 of a group this write took to v lacks exactly this write (versions follow
        commit order), so applying the stored counts brings it to v without a catch-up read; and every write
        committed before `sent` is at most v, so a confirmation from then stays true. Any other mirror (behind,
        or another epoch) is marked unconfirmed, as after any write.
        """
        if self._mirrors is None:
            return
        by_group: dict[str, list[tuple[str, int]]] = {}
        for c in counts:
            by_group.setdefault(c["g"], []).append((c["id"], int(c["n"])))
        for x in vers:
            mirror = self._mirrors.peek(x["g"])
            if mirror is not None and mirror.epoch == x["e"] and mirror.version == int(x["v"]) - 1:
                mirror.facts.set_retrievals(by_group.get(x["g"], ()))
                mirror.version = int(x["v"])
            else:
                self._mirrors.stale(x["g"], sent)

    async def _counted(self, group_id: str, read: Callable[[], Awaitable[list[Fact]]]) -> list[Fact]:
        """Facts read with this process's own retrieval counts, exactly: neither while its count write is on its
        way (the counts are then in neither place) nor across one begun or answered during the read (its counts
        may be in the rows, in memory, or in neither). Such a read is made again, at most COUNTED_READS times.

        Why: a read that took longer than RETRIEVAL_FLUSH_S under load came back without the two retrievals this
        process had just counted (conformance test, four test workers on two busy cores)."""
        for _ in range(COUNTED_READS):
            answered = self._counting.get(group_id)
            if answered is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(answered.wait(), COUNT_ANSWER_WAIT_S)
            began = self._count_writes
            facts = await read()
            if began == self._count_writes:
                break
        return self._with_pending(group_id, facts)

    def _with_pending(self, group_id: str, facts: list[Fact]) -> list[Fact]:
        """Retrievals not yet written still count: reads in this process see their own increments."""
        pending = self._retrievals
        if not pending:
            return facts
        return [f if (group_id, f.id) not in pending
                else replace(f, retrieval_count=f.retrieval_count + pending[(group_id, f.id)]) for f in facts]
