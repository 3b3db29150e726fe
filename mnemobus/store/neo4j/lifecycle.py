"""Neo4j's part of a group's life-cycle (`store.lifecycle.Lifecycle`): eviction, decay, promoted memories.

A mixin of `Neo4jStore`. Eviction is one write transaction; a dry run raises out of it with its counts, so the
server rolls back exactly the work a real run commits. Eviction totals live on one `:Retention` node per group,
promoted memories on `:Promoted` nodes (no relationship to any fact or entity: nothing that removes those can
reach them). Every write here moves the group's epoch, so the process mirrors reload the group.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from neo4j import AsyncManagedTransaction

from mnemobus.shared.groups import GroupId
from mnemobus.store.lifecycle import (Eviction, Promoted, PromotedReads, RetentionPolicy, evict_in_chunks,
                                      in_sessions)
from mnemobus.store.neo4j.cypher import BUMP_VERSIONS, NEW_EPOCH
from mnemobus.store.neo4j.overlay import EPOCH, as_datetime
from mnemobus.store.neo4j.rows import run_rows, utc_or_none

T = TypeVar("T")

_SEEN = "coalesce(e.last_seen, e.first_seen, $epoch)"
_ACTIVE = "(r.invalid_at IS NULL OR r.invalid_at > $now)"
ENDED = ("MATCH ()-[r:FACT {group_id: $g}]->() WHERE r.invalid_at IS NOT NULL AND r.invalid_at < $before "
         "RETURN r.id AS id, r.invalid_at AS ended LIMIT $n")
ORPHANS = (f"MATCH (e:Entity {{group_id: $g}}) WHERE {_SEEN} < $before "
           f"AND NOT EXISTS {{ MATCH (e)-[r:FACT]-() WHERE {_ACTIVE} }} RETURN e.id AS id")
NAMING = ("UNWIND $ids AS eid MATCH (e:Entity {id: eid, group_id: $g})-[r:FACT]-() "
          "RETURN DISTINCT r.id AS id, r.invalid_at AS ended")
RANKED = (f"MATCH (e:Entity {{group_id: $g}}) RETURN e.id AS id ORDER BY COUNT {{ (e)-[:FACT]-() }}, {_SEEN}, e.id")
DROP_FACTS = ("UNWIND $ids AS fid MATCH ()-[r:FACT {id: fid, group_id: $g}]->() DELETE r RETURN count(*) AS c")
DROP_ENTITIES = ("UNWIND $ids AS eid MATCH (e:Entity {id: eid, group_id: $g}) "
                 "OPTIONAL MATCH (a:Alias {group_id: $g})-[:ALIAS_OF]->(e) "
                 "WITH e, collect(a) AS aliases FOREACH (a IN aliases | DETACH DELETE a) DETACH DELETE e "
                 "RETURN count(*) AS c")
ADD_TOTALS = ("MERGE (t:Retention {group_id: $g}) ON CREATE SET t.facts = 0, t.entities = 0 "
              "SET t.facts = t.facts + $f, t.entities = t.entities + $e, "
              "t.cutoff = CASE WHEN t.cutoff IS NULL OR ($c IS NOT NULL AND $c > t.cutoff) THEN $c ELSE t.cutoff END")
_FADES = "coalesce(r.last_seen, r.valid_at, r.created_at) < $before AND r.confidence > $floor"
# whether a decay would change anything: when not, the group's version is left alone (a bump makes every process's
# mirror of the group read again)
DECAY_DUE = ("MATCH ()-[r:FACT {group_id: $g}]->() WHERE coalesce(r.retrieval_count, 0) > 0 OR " + _FADES
             + " RETURN count(r) > 0 AS due")
# the group's version goes up and each changed fact is stamped with it (as RESET_RETRIEVALS does): mirrors catch up
# by reading the changed rows, rather than reloading the group as a new epoch makes them
DECAY = (
    BUMP_VERSIONS
    + "CALL { WITH vers MATCH ()-[r:FACT {group_id: $g}]->() "
    "  WITH vers, r, " + _FADES + " AS fades "
    "  WHERE coalesce(r.retrieval_count, 0) > 0 OR fades "
    "  SET r.retrieval_count = toInteger(floor(coalesce(r.retrieval_count, 0) * $f)), "
    "  r.confidence = CASE WHEN NOT fades THEN r.confidence WHEN r.confidence * $f > $floor THEN r.confidence * $f "
    "  ELSE $floor END, r.ver = [v IN vers WHERE v.g = $g | v.v][0] "
    "  RETURN count(r) AS c } "
    "RETURN c"
)
# the write lock on the group's node is taken (SET) before its last decay is read: two workers serialise here
CLAIM_DECAY = ("MERGE (t:Retention {group_id: $g}) ON CREATE SET t.facts = 0, t.entities = 0 "
               "SET t.claimed_at = $now WITH t, t.decayed_at AS last "
               "SET t.decayed_at = CASE WHEN last IS NULL OR last <= $before THEN $now ELSE last END "
               "RETURN last IS NULL OR last <= $before AS due")
PROMOTED_PROPS = "n.id AS id, n.group_id AS group_id, n.kind AS kind, n.scope AS scope, n.text AS text, " \
                 "n.author AS author, n.created_at AS created_at, n.session AS session"


class _DryRun(Exception):
    """Carries a dry run's counts out of its transaction, which the driver then rolls back."""

    def __init__(self, found: Eviction) -> None:
        super().__init__("dry run")
        self.found = found


async def _ids(tx: AsyncManagedTransaction, query: str, p: dict[str, Any]) -> dict[str, Any]:
    return {r["id"]: r.get("ended") for r in await run_rows(tx, query, p)}


async def evict_in(tx: AsyncManagedTransaction, group_id: str, policy: RetentionPolicy, now: datetime,
                   limit: int | None = None) -> Eviction:
    """The three rules of `Lifecycle.evict` inside the caller's transaction (at most `limit` ended facts by
    rule 1); the totals node updated."""
    p: dict[str, Any] = {"g": group_id, "now": utc_or_none(now), "epoch": EPOCH, "n": limit if limit is not None
                         else 2**62}
    doomed: dict[str, datetime] = {}  # fact id -> what it takes from the past: its end, or now when it still held
    entities: list[str] = []
    if (ended := policy.ended_before(now)) is not None:
        doomed.update({k: as_datetime(v) for k, v in (await _ids(tx, ENDED, {**p, "before": ended})).items()})  # type: ignore[misc]
    if (unseen := policy.unseen_before(now)) is not None:
        orphans = list(await _ids(tx, ORPHANS, {**p, "before": unseen}))
        entities.extend(orphans)
        for fid, end in (await _ids(tx, NAMING, {**p, "ids": orphans})).items():
            doomed.setdefault(fid, as_datetime(end) or now)
    if policy.entity_cap is not None:
        held = len(await run_rows(tx, "MATCH (e:Entity {group_id: $g}) RETURN e.id AS id", p)) - len(entities)
        if held > policy.entity_cap:
            taken = set(entities)
            least = [i for i in await _ids(tx, RANKED, p) if i not in taken][:held - policy.entity_cap]
            entities.extend(least)
            for fid, end in (await _ids(tx, NAMING, {**p, "ids": least})).items():
                end_at = as_datetime(end)
                doomed.setdefault(fid, end_at if end_at is not None and end_at <= now else now)
    facts = int((await run_rows(tx, DROP_FACTS, {**p, "ids": list(doomed)}))[0]["c"]) if doomed else 0
    removed = int((await run_rows(tx, DROP_ENTITIES, {**p, "ids": entities}))[0]["c"]) if entities else 0
    cutoff = max(doomed.values(), default=None)
    if facts or removed:
        await run_rows(tx, NEW_EPOCH, p)
        await run_rows(tx, ADD_TOTALS, {**p, "f": facts, "e": removed, "c": cutoff})
    return Eviction(facts=facts, entities=removed, cutoff=cutoff)


def _promoted_of(r: dict[str, Any]) -> Promoted:
    return Promoted(id=r["id"], group_id=GroupId(r["group_id"]), kind=r["kind"], scope=r["scope"], text=r["text"],
                    author=r["author"], created_at=as_datetime(r["created_at"]), session=r.get("session"))  # type: ignore[arg-type]


class Neo4jLifecycle(PromotedReads):
    """`Lifecycle` over the store's sessions."""

    if TYPE_CHECKING:  # provided by Neo4jStore
        async def _write(self, fn: Callable[[AsyncManagedTransaction], Awaitable[T]]) -> T: ...
        async def _read_rows(self, query: str, **params: Any) -> list[dict[str, Any]]: ...
        async def flush_retrievals(self) -> None: ...
        def _committing(self, groups: Iterable[str]) -> AbstractContextManager[None]: ...

    async def evict(self, group_id: GroupId, policy: RetentionPolicy, *, now: datetime,
                    dry_run: bool = False) -> Eviction:
        async def run(rules: RetentionPolicy, limit: int | None) -> Eviction:
            async def work(tx: AsyncManagedTransaction) -> Eviction:
                found = await evict_in(tx, group_id, rules, now, limit)
                if dry_run:
                    raise _DryRun(found)
                return found

            try:
                return await self._write(work)
            except _DryRun as dry:
                return dry.found

        if dry_run:
            return await run(policy, None)
        with self._committing([group_id]):
            return await evict_in_chunks(run, policy)

    async def evicted_so_far(self, group_id: GroupId) -> Eviction:
        rows = await self._read_rows("MATCH (t:Retention {group_id: $g}) RETURN t.facts AS f, t.entities AS e, "
                                     "t.cutoff AS c", g=group_id)
        if not rows:
            return Eviction()
        return Eviction(facts=int(rows[0]["f"]), entities=int(rows[0]["e"]), cutoff=as_datetime(rows[0]["c"]))

    async def decay_retrievals(self, group_id: GroupId, factor: float, *, min_confidence: float, now: datetime,
                               every: timedelta) -> int | None:
        await self.flush_retrievals()  # counts still held in memory decay with the rest
        p = {"g": group_id, "f": float(factor), "floor": float(min_confidence), "now": utc_or_none(now),
             "before": utc_or_none(now - every)}

        async def work(tx: AsyncManagedTransaction) -> int | None:
            (claim,) = await run_rows(tx, CLAIM_DECAY, p)
            if not claim["due"]:
                return None  # another worker (or an earlier pass) did this interval's decay
            if not (await run_rows(tx, DECAY_DUE, p))[0]["due"]:
                return 0
            return int((await run_rows(tx, DECAY, {**p, "groups": [group_id]}))[0]["c"])

        with self._committing([group_id]):
            return await self._write(work)

    _promoted_marks: dict[str, tuple[bool, float]]

    def _promoted_seen(self, group_id: str, held: bool, asked: float) -> None:
        """A version read asked at `asked` (monotonic) found the group holding a promoted memory or not."""
        marks = self._promoted_marks
        if group_id not in marks or marks[group_id][1] <= asked:
            marks[group_id] = (held, asked)

    async def promoted_in_recall(self, group_ids: Sequence[GroupId], sessions: Sequence[str | None] | None,
                                 since: float) -> list[Promoted]:
        """A group whose version, read for this recall's searches (asked at or after `since`), came with no
        promoted memory is skipped: the version read asks for both in one seek each (VERSION_QUERY). A group not
        mirrored has no version read and is read as before."""
        marks = self._promoted_marks
        held = [g for g in dict.fromkeys(group_ids) if not ((m := marks.get(g)) and not m[0] and m[1] >= since)]
        return await self.promoted_of(held, sessions) if held else []

    async def keep_evictions(self, group_id: GroupId, totals: Eviction) -> None:
        await self._write(lambda tx: run_rows(
            tx, "MERGE (t:Retention {group_id: $g}) ON CREATE SET t.facts = 0, t.entities = 0 "
                "SET t.facts = CASE WHEN $f > t.facts THEN $f ELSE t.facts END, "
                "t.entities = CASE WHEN $e > t.entities THEN $e ELSE t.entities END, "
                "t.cutoff = CASE WHEN t.cutoff IS NULL OR ($c IS NOT NULL AND $c > t.cutoff) THEN $c ELSE t.cutoff END",
            {"g": group_id, "f": totals.facts, "e": totals.entities, "c": utc_or_none(totals.cutoff)}))

    async def add_promoted(self, memory: Promoted) -> None:
        m = memory
        self._promoted_marks.pop(m.group_id, None)
        await self._write(lambda tx: run_rows(
            tx, "MERGE (n:Promoted {id: $id}) ON CREATE SET n.group_id = $g, n.kind = $kind, n.scope = $scope, "
                "n.text = $text, n.author = $author, n.created_at = $at, n.session = $session",
            {"id": m.id, "g": m.group_id, "kind": m.kind, "scope": m.scope, "text": m.text, "author": m.author,
             "at": utc_or_none(m.created_at), "session": m.session}))

    async def promoted_of(self, group_ids: Sequence[GroupId],
                          sessions: Sequence[str | None] | None = None) -> list[Promoted]:
        ids = list(dict.fromkeys(group_ids))
        if not ids:
            return []
        rows = await self._read_rows(f"MATCH (n:Promoted) WHERE n.group_id IN $gs RETURN {PROMOTED_PROPS} "
                                     "ORDER BY n.created_at, n.id", gs=ids)
        return in_sessions([_promoted_of(r) for r in rows], sessions)

    async def delete_promoted(self, group_id: GroupId, memory_id: str) -> bool:
        self._promoted_marks.pop(group_id, None)
        rows = await self._write(lambda tx: run_rows(
            tx, "MATCH (n:Promoted {id: $id, group_id: $g}) DELETE n RETURN count(*) AS c", {"id": memory_id, "g": group_id}))
        return bool(rows and rows[0]["c"])


DELETE_GROUP_LIFECYCLE = ("MATCH (n:Promoted {group_id: $g}) DETACH DELETE n",
                          "MATCH (n:Retention {group_id: $g}) DETACH DELETE n")
