"""Erasing groups on Neo4j all or nothing: `/memory clear`, DELETE /group, delete-user.

Why: groups were deleted one after another, each in batches of DELETE_BATCH rows, so a failure part-way (the
server lost, a full disk) left part of a user's memory. Now every group of one erasure goes in ONE transaction
when their rows fit in it (ONE_TXN_ROWS: the transaction state of 100k deleted facts exceeded the server's
transaction memory, 70% of a 1 GiB heap): a failure rolls all of it back. Larger erasures are journalled: one
small transaction writes an `Erasure` node naming the groups, the batches follow, and each group leaves the
journal in the transaction that deletes its last rows; an erasure cut short is finished by the next erasure or
the next open of the store (`resume`).

Each journal has an owner (the store that wrote it) and a lease the owner renews with each batch. Why: any store
that opens finishes what the journal names, and while the owner was alive and still erasing, a second process
erased the same rows at once and the counts each returned were split. Another store takes over only a journal
whose lease ran out (`Neo4jSettings.erasure_lease_s`, 45 s: an owner that died, failed part-way, or was stuck
that long between two batches).

Each erasure also counts, in the transaction that starts it, one more erasure of each group on a
`GroupErasure` node that outlives the group (`store/erasures.py` says why: a write that started before the
erasure is refused when it commits, so it cannot bring the group back).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from neo4j import AsyncManagedTransaction

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import DeleteCounts
from mnemobus.store.neo4j.communities import DELETE_GROUP_COMMUNITIES
from mnemobus.store.neo4j.cypher import NEW_EPOCH
from mnemobus.store.neo4j.lifecycle import DELETE_GROUP_LIFECYCLE
from mnemobus.store.neo4j.rows import run_rows
from mnemobus.store.neo4j.tuning import DELETE_BATCH

log = logging.getLogger(__name__)
T = TypeVar("T")


class Neo4jStore(Protocol):
    """What erasing needs of the store (store.Neo4jStore; named here so the two modules import in one direction)."""

    async def _read(self, fn: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T: ...

    async def _write(self, fn: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T: ...

    def forget_groups(self, group_ids: Iterable[str]) -> None: ...

    erasure_owner: str  # this store's name on the journals it writes (one per store object)
    erasure_lease_s: float  # how long a journal stays this store's after its last batch

#: rows (facts, entities, aliases, episodes) of one erasure deleted in one transaction: 100k facts exceeded the
#: ~700 MB a 1 GiB server allows a transaction; a batch of DELETE_BATCH facts is what batched deletion always ran
#: in one transaction, so no erasure asks more of the server than before
ONE_TXN_ROWS = DELETE_BATCH

# each count served by an index (aliases: key and type named, as in erase_rows, for the constraint's index)
ROWS_OF = ("UNWIND $gs AS g RETURN sum(COUNT { ()-[:FACT {group_id: g}]->() } + COUNT { (:Entity {group_id: g}) } "
           "+ COUNT { MATCH (a:Alias) WHERE a.group_id = g AND a.key IS NOT NULL AND a.type IS NOT NULL } "
           "+ COUNT { (:Episode {group_id: g}) }) AS n")
COUNT_ERASURE = ("UNWIND $gs AS g MERGE (x:GroupErasure {group_id: g}) ON CREATE SET x.n = 0 SET x.n = x.n + 1")
# one journal per erasure; the server's clock times the leases, so the processes' clocks need not agree
LEASE_END = "datetime() + duration({milliseconds: toInteger($lease_s * 1000)})"
JOURNAL = f"CREATE (j:Erasure {{id: $id, groups: $gs, owner: $owner, lease_until: {LEASE_END}}})"
# the owner's renewal, first in each batch's transaction: no row when another store took the journal over (the
# owner read under the journal's lock, as TAKE_OVER does, so a take-over committing meanwhile is seen)
RENEW = ("MATCH (j:Erasure {id: $id}) SET j.looked_at = datetime() WITH j WHERE j.owner = $owner "
         f"SET j.lease_until = {LEASE_END} RETURN j.id AS id")
LEAVE_JOURNAL = ("MATCH (j:Erasure {id: $id}) SET j.groups = [x IN j.groups WHERE x <> $g] "
                 "WITH j WHERE size(j.groups) = 0 DELETE j")
# Taking over: the expired journals' write locks (by a write that reads nothing: `SET j.owner = j.owner` read the
# owner before it waited for the lock and wrote that stale value back after; in id order, so two stores taking
# over never wait on each other in a circle), then each lease read again under the lock, so of two stores opening
# at once only one takes it; a live journal is not locked, so an open never waits on its owner's batch. A journal
# of the version before leases (id 'pending', no lease) is an expired one.
TAKE_OVER = ("MATCH (j:Erasure) WHERE j.lease_until IS NULL OR j.lease_until < datetime() "
             "WITH j ORDER BY j.id SET j.looked_at = datetime() "
             "WITH j WHERE j.lease_until IS NULL OR j.lease_until < datetime() "
             f"SET j.owner = $owner, j.lease_until = {LEASE_END} RETURN j.id AS id, j.groups AS gs")
JOURNALS_NAMING = ("MATCH (j:Erasure) WHERE any(g IN j.groups WHERE g IN $gs) "
                   "RETURN j.id AS id, j.groups AS gs, j.owner AS owner, "
                   "coalesce(j.lease_until < datetime(), true) AS expired")
ERASURES = "UNWIND $gs AS g OPTIONAL MATCH (x:GroupErasure {group_id: g}) RETURN g, coalesce(x.n, 0) AS n"
# a write's check: the erasure count under the node's write lock, which an erasure takes to count (held by either
# until its transaction ends, so the other waits and then reads what was committed)
HOLD_ERASURES = ("UNWIND $gs AS g MERGE (x:GroupErasure {group_id: g}) ON CREATE SET x.n = 0 SET x.n = x.n "
                 "RETURN g, x.n AS n")


class _Outgrew(Exception):
    """Writes made the groups too large for one transaction between their count and their erasure."""


async def erase_rows(tx: AsyncManagedTransaction, group: str, limit: int) -> tuple[DeleteCounts, bool]:
    """At most `limit` rows of each kind of the group, facts first; (what went, whether the group is gone, in which
    case its version node goes too)."""
    p = {"g": group, "n": limit}
    await run_rows(tx, NEW_EPOCH, p)  # mirrors of the group reload it (smaller, or gone)
    f = (await run_rows(tx, "MATCH ()-[r:FACT {group_id: $g}]->() WITH r LIMIT $n DELETE r RETURN count(r) AS c", p))[0]["c"]
    if f >= limit:
        return DeleteCounts(facts=f), False
    e = (await run_rows(tx, "MATCH (n:Entity {group_id: $g}) WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
    if e >= limit:
        return DeleteCounts(facts=f, entities=e), False
    # key and type named so the (group_id, key, type) constraint's index serves it: a label scan otherwise
    a = (await run_rows(tx, "MATCH (n:Alias) WHERE n.group_id = $g AND n.key IS NOT NULL AND n.type IS NOT NULL "
                            "WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
    if a >= limit:
        return DeleteCounts(facts=f, entities=e), False
    ep = (await run_rows(tx, "MATCH (n:Episode {group_id: $g}) WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
    done = ep < limit
    if done:
        await run_rows(tx, "MATCH (gv:GroupVersion {group_id: $g}) DELETE gv", p)
        # communities, promoted memories and retention marks go with the group's last rows, once, not every batch
        for q in (*DELETE_GROUP_COMMUNITIES, *DELETE_GROUP_LIFECYCLE):
            await run_rows(tx, q, p)
    return DeleteCounts(episodes=ep, entities=e, facts=f), done


async def erase(store: Neo4jStore, groups: Sequence[GroupId]) -> DeleteCounts:
    """Every group named, all or nothing (see the module); what went of them. An earlier erasure cut short whose
    owner's lease ran out is finished first; its rows are not in the counts (it may be another caller's, of other
    groups: `resume` logs it)."""
    await resume(store)
    groups = list(dict.fromkeys(groups))
    if not groups:
        return DeleteCounts()
    store.forget_groups(groups)
    rows = (await store._read(lambda tx: run_rows(tx, ROWS_OF, {"gs": groups})))[0]["n"]
    if rows <= ONE_TXN_ROWS:
        async def at_once(tx: AsyncManagedTransaction) -> DeleteCounts:
            for g in sorted(groups):  # version nodes, then erasure counts: the order writers lock them in
                await run_rows(tx, NEW_EPOCH, {"g": g})
            await run_rows(tx, COUNT_ERASURE, {"gs": sorted(groups)})
            done: list[DeleteCounts] = []
            for g in groups:
                counts, gone = await erase_rows(tx, g, ONE_TXN_ROWS + 1)
                if not gone:
                    raise _Outgrew(g)  # rolled back: journalled below
                done.append(counts)
            return DeleteCounts.total(done)

        try:
            return await store._write(at_once)
        except _Outgrew as exc:
            log.info("group %s grew past one transaction while it was counted: erasing it journalled", exc)

    journal_id = uuid.uuid4().hex

    async def journal(tx: AsyncManagedTransaction) -> None:
        await run_rows(tx, COUNT_ERASURE, {"gs": sorted(groups)})
        await run_rows(tx, JOURNAL, {"id": journal_id, "gs": groups, "owner": store.erasure_owner,
                                     "lease_s": store.erasure_lease_s})

    await store._write(journal)
    log.info("erasing %d group(s) of %d rows in batches, journalled: a failure part-way is finished by the next "
             "erasure or the next start", len(groups), rows)
    return await _finish(store, journal_id, groups)


async def erasure_counts(store: Neo4jStore, groups: Sequence[GroupId]) -> dict[GroupId, int]:
    rows = await store._read(lambda tx: run_rows(tx, ERASURES, {"gs": list(groups)}))
    return {GroupId(r["g"]): int(r["n"]) for r in rows}


async def resume(store: Neo4jStore) -> DeleteCounts:
    """Finish the journalled erasures earlier calls (of any process) left part-way whose owners' leases ran out;
    nothing when there is none. A journal whose owner is still at it is the owner's."""
    taken = await store._write(lambda tx: run_rows(
        tx, TAKE_OVER, {"owner": store.erasure_owner, "lease_s": store.erasure_lease_s}))
    done: list[DeleteCounts] = []
    for j in taken:
        log.warning("finishing an erasure cut short (journal %s, its owner's lease over): %d group(s) still in it",
                    j["id"], len(j["gs"]))
        store.forget_groups(j["gs"])
        done.append(await _finish(store, j["id"], [GroupId(g) for g in j["gs"]]))
    return DeleteCounts.total(done)


class _TakenOver(Exception):
    """Another store took the journal over (this one's lease had run out): the rest is that store's to erase."""


async def _finish(store: Neo4jStore, journal_id: str, groups: Sequence[GroupId]) -> DeleteCounts:
    """Delete the journalled groups in batches, renewing the lease in each; each group leaves the journal in the
    transaction of its last batch. A batch that fails leaves the journal as it is: once the lease runs out, the
    next erasure or open (of any process) finishes it."""
    done: list[DeleteCounts] = []
    owned = {"id": journal_id, "owner": store.erasure_owner, "lease_s": store.erasure_lease_s}
    try:
        for g in groups:
            while True:
                async def batch(tx: AsyncManagedTransaction, g: str = g) -> tuple[DeleteCounts, bool]:
                    if not await run_rows(tx, RENEW, owned):
                        raise _TakenOver(journal_id)
                    counts, gone = await erase_rows(tx, g, DELETE_BATCH)
                    if gone:  # counted again: a write that started while the batches ran is refused too
                        await run_rows(tx, COUNT_ERASURE, {"gs": [g]})
                        await run_rows(tx, LEAVE_JOURNAL, {"id": journal_id, "g": g})
                    return counts, gone

                counts, gone = await store._write(batch)
                done.append(counts)
                if gone:
                    break
    except _TakenOver:
        log.warning("erasure journal %s was taken over by another store after this one's lease (%.0f s) ran out "
                    "between two batches: it finishes the rest", journal_id, store.erasure_lease_s)
    return DeleteCounts.total(done)
