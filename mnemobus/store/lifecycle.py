"""The store's part of a group's life-cycle: eviction past retention, decay of retrieval counts, promoted memories.

Why a contract of its own: a group used to only grow. Eviction removes rows a history query would otherwise
have shown, so every backend keeps, per group, what it evicted so far and the instant before which its past is
no longer complete (`Eviction.cutoff`); the doors say so rather than answer with a silently thinner past.
Promoted memories are what a user marked as never to be forgotten: rows apart from the facts, so neither decay
nor eviction can reach them; only an explicit delete (or the group's erasure) removes one.

Both backends implement `Lifecycle` and are held to it by `tests/store/test_lifecycle_conformance.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol, runtime_checkable

from mnemobus.shared.groups import GroupId

PromotedKind = Literal["decision", "lesson", "preference", "procedure"]
PromotedScope = Literal["session", "workspace", "user"]
PROMOTED_KINDS: tuple[str, ...] = ("decision", "lesson", "preference", "procedure")
PROMOTED_SCOPES: tuple[str, ...] = ("session", "workspace", "user")


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What eviction may remove from a group (None: that rule is off)."""

    ended_days: float | None = None  # facts whose end (invalid_at) lies longer ago than this
    orphan_days: float | None = None  # entities with no active fact, unseen for longer than this
    entity_cap: int | None = None  # at most this many entities: least connected, then least recently seen, go first

    def ended_before(self, now: datetime) -> datetime | None:
        return None if self.ended_days is None else now - timedelta(days=self.ended_days)

    def unseen_before(self, now: datetime) -> datetime | None:
        return None if self.orphan_days is None else now - timedelta(days=self.orphan_days)


@dataclass(frozen=True, slots=True)
class Eviction:
    """Rows one eviction removed (or, dry, would remove), or a group's totals so far; `cutoff`: facts valid before
    it may be missing (the latest end of an evicted fact; the eviction time for a fact evicted while it held)."""

    facts: int = 0
    entities: int = 0
    cutoff: datetime | None = None

    @property
    def empty(self) -> bool:
        return not self.facts and not self.entities


#: ended facts evicted per transaction before the rest of a policy runs: a group's whole backlog in one
#: transaction held the writer for seconds (10k facts: 2.3 s on SQLite, load 18) and, on Neo4j, can exceed the
#: server's transaction memory
EVICT_CHUNK = 2000


def added(a: Eviction, b: Eviction) -> Eviction:
    """Two evictions of one group as one: counts summed, the later cutoff."""
    cutoffs = [c for c in (a.cutoff, b.cutoff) if c is not None]
    return Eviction(facts=a.facts + b.facts, entities=a.entities + b.entities, cutoff=max(cutoffs, default=None))


async def evict_in_chunks(run: Callable[[RetentionPolicy, int | None], Awaitable[Eviction]],
                          policy: RetentionPolicy) -> Eviction:
    """A real eviction as transactions a writer can wait between: the ended facts `EVICT_CHUNK` at a time (rule 1
    alone), then the whole policy once, which finds what is left. `run(policy, limit)` is one transaction."""
    total = Eviction()
    if policy.ended_days is not None:
        ended_only = RetentionPolicy(ended_days=policy.ended_days)
        while True:
            part = await run(ended_only, EVICT_CHUNK)
            total = added(total, part)
            if part.facts < EVICT_CHUNK:
                break
    return added(total, await run(policy, None))


@dataclass(frozen=True, slots=True)
class Promoted:
    """A memory a user promoted: kept with its kind, scope, author and time; `session` names the conversation
    (channel) a session-scoped memory belongs to."""

    id: str
    group_id: GroupId
    kind: str
    scope: str
    text: str
    author: str
    created_at: datetime
    session: str | None = None


def in_sessions(found: Sequence[Promoted], sessions: Sequence[str | None] | None) -> list[Promoted]:
    """The memories a conversation sees: every one not scoped to a session, and those of its own sessions."""
    if sessions is None:
        return list(found)
    return [m for m in found if m.scope != "session" or m.session in sessions]


class PromotedReads:
    """A backend's one-group read, from its many-group one."""

    async def promoted_of(self, group_ids: Sequence[GroupId],
                          sessions: Sequence[str | None] | None = None) -> list[Promoted]:
        raise NotImplementedError

    async def promoted(self, group_id: GroupId, sessions: Sequence[str | None] | None = None) -> list[Promoted]:
        return await self.promoted_of([group_id], sessions)

    async def promoted_in_recall(self, group_ids: Sequence[GroupId], sessions: Sequence[str | None] | None,
                                 since: float) -> list[Promoted]:
        """`promoted_of` from inside a recall's `run_reads`; a backend that knows which groups hold none skips them."""
        return await self.promoted_of(group_ids, sessions)


@runtime_checkable
class Lifecycle(Protocol):
    async def evict(self, group_id: GroupId, policy: RetentionPolicy, *, now: datetime,
                    dry_run: bool = False) -> Eviction:
        """Remove what the policy says has outlived its use, in one transaction, and add it to the group's totals.

        Order: facts ended before `policy.ended_before(now)`; then entities without an active fact unseen since
        `policy.unseen_before(now)` (with the ended facts that still name them); then, over `entity_cap`, the
        least connected entities (fewest facts, then oldest last_seen, then id) with every fact naming them.
        An evicted fact never brings back the fact it had superseded (it ended by itself, unlike a deleted one).
        `dry_run`: the same counts, nothing removed, the totals unchanged. Promoted memories are never touched."""

    async def evicted_so_far(self, group_id: GroupId) -> Eviction:
        """The group's eviction totals and its cutoff (all zero, None before its first eviction)."""

    async def decay_retrievals(self, group_id: GroupId, factor: float, *, min_confidence: float, now: datetime,
                               every: timedelta) -> int | None:
        """Once per `every` a group: retrieval counts times `factor` (rounded down), and the confidence of facts last
        observed more than `every` before `now` times `factor`, never below `min_confidence`; the facts changed.
        None (nothing done) when the group already decayed less than `every` before `now`: several workers run
        the same schedule, and a group must fade at one rate however many there are."""

    async def keep_evictions(self, group_id: GroupId, totals: Eviction) -> None:
        """Raise the group's eviction totals and cutoff to at least `totals` (`mnemobus migrate` brings a group's
        record along, so an as-of query older than its cutoff still says so after a move; a rerun changes
        nothing)."""

    async def add_promoted(self, memory: Promoted) -> None:
        """Store a promoted memory (a second add of one id is a no-op)."""

    async def promoted(self, group_id: GroupId, sessions: Sequence[str | None] | None = None) -> list[Promoted]:
        """The group's promoted memories, oldest first; with `sessions`, a session-scoped one only when its session
        is among them."""

    async def promoted_of(self, group_ids: Sequence[GroupId],
                          sessions: Sequence[str | None] | None = None) -> list[Promoted]:
        """`promoted` for several groups in one read (recall asks on every request), oldest first."""

    async def promoted_in_recall(self, group_ids: Sequence[GroupId], sessions: Sequence[str | None] | None,
                                 since: float) -> list[Promoted]:
        """`promoted_of` as a recall asks it, inside its `run_reads`: a group whose state, as the backend read it at
        or after `since` (`time.monotonic()` when the recall started), held no promoted memory is skipped without
        a read (most groups hold none). A promotion or delete committed before the recall started is seen."""

    async def delete_promoted(self, group_id: GroupId, memory_id: str) -> bool:
        """Remove one promoted memory; False when the group holds none with that id."""
