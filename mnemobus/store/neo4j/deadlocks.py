"""Deadlocks between writers of one Neo4j: which failure is one, and how long the loser waits before it tries again.

Why: several workers (processes) write one server. Each transaction takes its groups' version-node locks sorted,
but a transaction that reads a group it had not named first, the unique-constraint index entries of new rows and
the endpoints of new relationships are locked in the order the statement meets them, so two writers can still
wait on each other in a circle. The server then fails one of them (`DeadlockDetected`, a TransientError) and the
other goes on; the loser's transaction is rolled back and runs again (write_txn.py replays it, writes.py re-runs a
batch), at most LOCK_RETRIES times, after a pause that grows and is jittered so two losers do not meet again.
"""

from __future__ import annotations

import asyncio
import random

from neo4j import exceptions as nx

from mnemobus.shared.errors import StoreUnavailable

#: what an observer of the store's deadlocks is told (Writes.observe_deadlocks, the metric
#: mnemobus_store_deadlocks_total): the transaction ran again and was stored, or it could not be (its reads
#: answered differently the second time, or it lost every try) and the caller was told to retry; and a write that
#: waited for a group's version node while an erasure deleted it (VersionNodeErased: no deadlock, run again)
REPLAYED, GAVE_UP, ERASED_MEANWHILE = "replayed", "gave_up", "erased_meanwhile"


def is_deadlock(exc: BaseException) -> bool:
    """The server chose this transaction as the victim of a deadlock: running it again will succeed."""
    return isinstance(exc, nx.TransientError) and "DeadlockDetected" in (exc.code or "")


#: the server ended a transaction for running past its timeout (WRITE_TIMEOUT_S), a wait for a lock included
_TIMED_OUT = ("TransactionTimedOut", "LockClientStopped")


def timed_out(exc: BaseException) -> bool:
    """The server ended the transaction at its timeout: nothing of it is stored, and it may be run again."""
    return isinstance(exc, nx.Neo4jError) and any(code in (exc.code or "") for code in _TIMED_OUT)


def timeout_failure(exc: nx.Neo4jError, timeout_s: float | None) -> StoreUnavailable:
    """What the store says for a write the server ended at its timeout: a store failure (every work of a batch
    fails with it and is retried), never one work's own error."""
    return StoreUnavailable(f"Neo4j ended the write after its {timeout_s:g} s timeout (a lock another writer held, "
                            f"or a slow server), nothing stored: {exc.code}")


class VersionNodeErased(StoreUnavailable):
    """A group's version node was deleted (an erasure committed) while this transaction waited for its lock: the
    lock held is on nothing, and the version read is null. Running the write again creates the node afresh and
    meets the erasure as every write does (the erasure count changed since the write started: GroupErased)."""

    def __init__(self, group_id: str) -> None:
        super().__init__(f"group {group_id!r} was erased while this write waited for its lock; running it again")


def lost_a_lock_race(exc: StoreUnavailable) -> bool:
    """A write failed because it lost a race for a lock: a deadlock's victim (the store's error wraps the
    server's), or it waited for a version node an erasure deleted. Running it again goes through."""
    return isinstance(exc, VersionNodeErased) or lost_a_deadlock(exc)


def lost_a_deadlock(exc: StoreUnavailable) -> bool:
    return exc.__cause__ is not None and is_deadlock(exc.__cause__)


async def pause_before_try(n: int) -> None:
    """Before try n+1 (n >= 0): 10 ms doubling, each between half and one and a half of that."""
    await asyncio.sleep(0.01 * 2**n * random.uniform(0.5, 1.5))
