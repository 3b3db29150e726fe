"""Write transactions (one per episode, or a batch in one go) and bulk loads."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

from neo4j import exceptions as nx

from mnemobus.shared.errors import StoreIntegrityError, StoreUnavailable
from mnemobus.store.contract import Prefetch, Vector
from mnemobus.store.model import Entity, Fact
from mnemobus.store.neo4j.cypher import BUMP_VERSIONS, TRANSIENT, VERSION_OF
from mnemobus.store.neo4j.deadlocks import (ERASED_MEANWHILE, GAVE_UP, REPLAYED, VersionNodeErased, lost_a_deadlock,
                                            lost_a_lock_race, pause_before_try, timed_out,
                                            timeout_failure)
from mnemobus.store.neo4j.rows import entity_params, fact_params, run_rows
from mnemobus.store.neo4j.tuning import LOCK_RETRIES
from mnemobus.store.neo4j.write_txn import Neo4jWriteTxn, SplitBatch

log = logging.getLogger("mnemobus.store.neo4j.store")  # one log for the whole store
T = TypeVar("T")


async def again_after_lost_lock_race(attempt: Callable[[], Awaitable[T]], what: str,
                                     on_deadlock: Callable[[str], None] = lambda outcome: None) -> T:
    """Run a whole transaction again when it lost a race for a lock (LOCK_RETRIES times at most): a deadlock's victim
    (the other writer has its locks by then, so the next try goes through) or a wait for a version node an erasure
    deleted (the next try meets the erasure); any other failure is the caller's."""
    deadlocked = False  # an erasure's race is no deadlock: the observer hears it as erased_meanwhile, never replayed
    for n in range(LOCK_RETRIES + 1):
        try:
            result = await attempt()
        except StoreUnavailable as exc:
            if not lost_a_lock_race(exc):
                raise
            deadlocked = deadlocked or lost_a_deadlock(exc)
            if isinstance(exc, VersionNodeErased):
                on_deadlock(ERASED_MEANWHILE)  # each one: seen in the metric beside the deadlocks, not as one
            if n == LOCK_RETRIES:
                if deadlocked:
                    on_deadlock(GAVE_UP)
                raise
            log.warning("%s lost a lock race (%s); running it again", what,
                        "a deadlock with another writer" if lost_a_deadlock(exc) else exc)
            await pause_before_try(n)
            continue
        if deadlocked:
            on_deadlock(REPLAYED)
        return result
    raise AssertionError("unreachable")


class Writes:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    def observe_deadlocks(self, observer: Callable[[str], None]) -> None:
        """`observer(outcome)` once per write transaction that lost a deadlock to another writer: REPLAYED (it ran
        again and was stored) or GAVE_UP (the caller was told to retry); and ERASED_MEANWHILE once per try that
        waited for a group's version node an erasure deleted (run again; see deadlocks.py)."""
        self._deadlock_observers.append(observer)

    def _deadlocked(self, outcome: str) -> None:
        for observer in self._deadlock_observers:
            observer(outcome)

    @asynccontextmanager
    async def _write_txn(self) -> AsyncIterator[Neo4jWriteTxn]:
        """An explicit transaction behind a WriteTxn: flushed and committed on normal exit, rolled back otherwise.

        The caller holds the write lock. Committed groups' mirrors are marked unconfirmed. A statement that loses
        a deadlock is replayed in a new transaction of the same session (Neo4jWriteTxn._replay).
        """
        try:
            async with self._open_driver().session(database=self.database) as s:
                wtx = Neo4jWriteTxn(await s.begin_transaction(timeout=self.write_timeout_s), self._with_pending,
                                    lambda g, known, load: self._mirror(g, confirm=True, known=known, load=load),
                                    again=s, on_deadlock=self._deadlocked, timeout_s=self.write_timeout_s)
                try:
                    yield wtx
                    await wtx.flush()
                except BaseException:
                    try:
                        await wtx.tx.rollback()
                    except TRANSIENT:
                        pass  # the server drops an unfinished transaction when the connection goes
                    raise
                with self._committing(wtx.groups):
                    await wtx.tx.commit()
        except nx.ConstraintError as exc:
            raise StoreIntegrityError(f"Neo4j refused the write: {exc.message}") from exc
        except nx.ClientError as exc:  # the commit's; a statement's is raised as a store failure where it ran
            if not timed_out(exc):
                raise
            raise timeout_failure(exc, self.write_timeout_s) from exc
        except TRANSIENT as exc:
            raise StoreUnavailable(f"Neo4j write failed, nothing stored: {type(exc).__name__}: {exc}") from exc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Neo4jWriteTxn]:
        """One explicit transaction for one episode: committed on normal exit, rolled back otherwise."""
        async with self._write_lock:
            async with self._write_txn() as wtx:
                yield wtx

    async def run_transactions(self, works: Sequence[Callable[[Neo4jWriteTxn], Awaitable[T]]],
                               prefetch: Prefetch | None = None) -> list[T | Exception]:
        """Every work atomic on its own, the batch in one transaction with one commit (contract: BatchTransactions).

        Why: the commit is most of an episode's cost on Neo4j (index updates and the log force
        happen there). Neo4j has no savepoints, so a failing work is isolated in one of two ways.
        While all it wrote is still queued in the WriteTxn (the usual case: the queue is sent at
        the end), its rows are dropped and the batch goes on. When some of them were already sent
        (a read made the queue flush), or the batch's final flush is refused (an integrity error
        belongs to some work), the transaction is rolled back and every work not yet failed runs
        again in a transaction of its own, so only the bad one fails. A store failure fails every
        slot, as the contract asks; episodes are idempotent by id, so the caller's retry is safe.

        The transaction first locks the groups `prefetch` names and reads what it names (one round trip
        each, see Neo4jWriteTxn.prefetch). A batch that lost a deadlock to another writer (a group it had
        not named locked out of order) is run again, at most LOCK_RETRIES times.
        """
        if not works:
            return []
        failed: dict[int, Exception] = {}

        async def batch() -> list[T | Exception] | None:
            failed.clear()
            return await self._one_transaction(works, failed, prefetch)

        async with self._write_lock:
            try:
                done = await again_after_lost_lock_race(batch, f"a batch of {len(works)} writes", self._deadlocked)
            except StoreUnavailable as exc:
                return [exc for _ in works]
        if done is not None:
            return done
        log.warning("a batch of %d writes was rolled back (%d failed on their own); running each in its own "
                    "transaction so only the bad one fails", len(works), len(failed))
        out: list[T | Exception] = []
        for i, work in enumerate(works):
            if i in failed:
                out.append(failed[i])
                continue
            result: T | Exception
            try:
                result = await again_after_lost_lock_race(functools.partial(self._alone, work), "a write",
                                                          self._deadlocked)
            except Exception as exc:  # noqa: BLE001 - returned in the work's slot
                result = exc
            out.append(result)
        return out

    async def _alone(self, work: Callable[[Neo4jWriteTxn], Awaitable[T]]) -> T:
        async with self.transaction() as txn:
            return await work(txn)

    async def _one_transaction(self, works: Sequence[Callable[[Neo4jWriteTxn], Awaitable[T]]],
                               failed: dict[int, Exception], prefetch: Prefetch | None) -> list[T | Exception] | None:
        """The batch in one transaction; None when it was rolled back and must be split (`failed`: works that failed alone)."""
        results: list[T | Exception] = []
        try:
            async with self._write_txn() as wtx:
                if prefetch is not None:
                    await wtx.prefetch(prefetch)
                for i, work in enumerate(works):
                    mark = wtx.mark()
                    try:
                        results.append(await work(wtx))
                    except (StoreUnavailable, *TRANSIENT):
                        raise
                    except Exception as exc:  # noqa: BLE001 - the work's own failure
                        if not wtx.rewind(mark):
                            raise SplitBatch from exc
                        failed[i] = exc
                        results.append(exc)
        except (SplitBatch, StoreIntegrityError):
            return None
        return results

    async def bulk_load(
        self, entities: Sequence[tuple[Entity, Vector | None]], facts: Sequence[tuple[Fact, Vector | None]],
        batch: int = 2000,
    ) -> None:
        """Load pre-resolved rows in UNWIND batches, bypassing resolution: for benchmarks and imports only.

        Rows become parameters one batch at a time: as Python float lists the embeddings of
        100k facts take over a gigabyte. Batches of a few thousand also leave the vector
        indexes fewer Lucene segments to search than many small commits would.
        """
        with self._committing({e.group_id for e, _ in entities} | {f.group_id for f, _ in facts}):
            await self._bulk_rows(entities, facts, batch)
        await self._open_driver().execute_query("CALL db.awaitIndexes(600)", database_=self.database)

    async def _bulk_rows(self, entities: Sequence[tuple[Entity, Vector | None]],
                         facts: Sequence[tuple[Fact, Vector | None]], batch: int) -> None:
        for i in range(0, len(entities), batch):
            rows = [{k: v for k, v in entity_params(e, vec).items() if v is not None}
                    for e, vec in entities[i : i + batch]]
            await self._write(lambda tx, rows=rows: run_rows(
                tx,
                BUMP_VERSIONS + "UNWIND $rows AS p CREATE (e:Entity) SET e = p, e.ver = " + VERSION_OF.format("p") + " "
                "WITH e, p UNWIND e.aliases AS key "
                "MERGE (a:Alias {group_id: p.group_id, key: key, type: p.type}) ON CREATE SET a.entity_id = p.id "
                "WITH e, a, p WHERE a.entity_id = p.id MERGE (a)-[:ALIAS_OF]->(e)",
                {"rows": rows, "groups": sorted({r["group_id"] for r in rows})},
            ))
        for i in range(0, len(facts), batch):
            rows = [{k: v for k, v in fact_params(f, vec).items() if v is not None} for f, vec in facts[i : i + batch]]
            await self._write(lambda tx, rows=rows: run_rows(
                tx,
                BUMP_VERSIONS + "UNWIND $rows AS p MATCH (s:Entity {id: p.subject_id}), (o:Entity {id: p.object_id}) "
                "CREATE (s)-[r:FACT]->(o) SET r = p, r.ver = " + VERSION_OF.format("p"),
                {"rows": rows, "groups": sorted({r["group_id"] for r in rows})},
            ))
