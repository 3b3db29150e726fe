"""The memory service's life-cycle operations: promote, list and delete promoted memories, evict on demand.

Every door (NATS `memory.api.*`, HTTP, the `/memory promote` command, the CLI through NATS) goes through the
functions here, as the other operations go through `MemoryService`.

Who may promote into a user's scope follows `/memory clear`: the actor must be proven (the owner of the API key
the request carries, or the word of the operator role on a bus enforcing permissions; `callers.proven_actor`),
and must be the user named, or an admin of users.yaml acting for them. A claim alone never writes into
someone's memory. Over MCP, an admin token (as for `clear_group`) promotes for any user it names; another token
only into the memory of the user it acts as (`mcp.clients[].user`), and nowhere when it acts as no one.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from mnemobus.api.callers import current_caller, proven_actor
from mnemobus.api.core import Forbidden, MemoryService, NotFound
from mnemobus.api.erasure_rights import BY_MCP_TOKEN
from mnemobus.api.models import Body, DeleteResult, GroupIdField
from mnemobus.engine.recall import checked_groups
from mnemobus.engine.retention import cutoff_note, evict_groups, lifecycle_of, policy_of
from mnemobus.shared.errors import InvalidMessage
from mnemobus.shared.groups import GroupId, agent_user_group, sanitize_segment, user_group
from mnemobus.store.lifecycle import Eviction, Promoted

log = logging.getLogger("mnemobus.api.lifecycle")

Kind = Literal["decision", "lesson", "preference", "procedure"]
Scope = Literal["session", "workspace", "user"]


class PromoteRequest(Body):
    text: str = Field(min_length=1, max_length=10_000, description="what must never be forgotten, as said")
    kind: Kind
    scope: Scope = "user"
    user_id: str | None = Field(default=None, min_length=1, max_length=64, description="whose memory (a user of "
                                "users.yaml); default: the actor")
    agent_id: str | None = Field(default=None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$",
                                 description="scope workspace: the agent whose workspace with the user it belongs to")
    session: str | None = Field(default=None, min_length=1, max_length=256, description="scope session: the "
                                "conversation (channel id) it belongs to")
    actor: str | None = Field(default=None, min_length=1, max_length=64, description="who promotes: with a key of "
                              "api.keys the key's owner; without, believed only from the operator role of an "
                              "enforcing bus")


class PromotedResult(BaseModel):
    uuid: str
    group_id: str
    kind: Kind
    scope: Scope
    text: str
    author: str
    created_at: datetime
    session: str | None = None

    @classmethod
    def of(cls, m: Promoted) -> PromotedResult:
        return cls(uuid=m.id, group_id=m.group_id, kind=m.kind, scope=m.scope, text=m.text,  # type: ignore[arg-type]
                   author=m.author, created_at=m.created_at, session=m.session)


class PromotedRequest(Body):
    group_id: GroupIdField


class PromotedList(BaseModel):
    promoted: list[PromotedResult]


class DeletePromotedRequest(Body):
    group_id: GroupIdField
    uuid: str = Field(min_length=1, max_length=64)


class EvictRequest(Body):
    group_id: GroupIdField | None = Field(default=None, description="one group; default: every group")
    dry_run: bool = Field(default=False, description="count what would go, remove nothing")


class GroupEviction(BaseModel):
    group_id: str
    facts: int
    entities: int
    cutoff: datetime | None = None


class EvictResult(BaseModel):
    dry_run: bool
    facts: int
    entities: int
    groups: list[GroupEviction] = Field(description="the groups that lost (or, dry, would lose) anything")


def target_group(scope: str, user: str, agent_id: str | None, session: str | None) -> GroupId:
    """The group a promoted memory of this scope lives in: the user's own group (scope user, and scope session
    with its conversation named), or the agent's view of the user (scope workspace)."""
    base = user_group(user)
    if scope == "workspace":
        if not agent_id:
            raise InvalidMessage("missing_agent", "scope workspace needs the agent whose workspace it is (agent_id)")
        return agent_user_group(sanitize_segment(agent_id), base)
    if scope == "session" and not session:
        raise InvalidMessage("missing_session", "scope session needs the conversation it belongs to (session)")
    return base


async def promote(svc: MemoryService, q: PromoteRequest, *, claimed: str | None = None) -> Promoted:
    """Store a promoted memory for a proven actor; `claimed` is whom a chat request's source resolves to."""
    metrics = svc.rt.metrics.lifecycle
    try:
        caller = current_caller.get()
        if caller.mcp_admin is not None:  # an admin MCP token, its own proof: for any user it names
            actor, proof = f"mcp:{caller.mcp_admin}", BY_MCP_TOKEN
            if not q.user_id:
                raise InvalidMessage("missing_user", "an admin MCP client promotes for a user of users.yaml: name "
                                     "them (user_id)")
        elif caller.mcp_client is not None and caller.owner is None:
            raise Forbidden(f"MCP client {caller.mcp_client!r} is not admin and acts as no user of users.yaml "
                            "(mcp.clients[].user): it may promote into no one's memory")
        else:
            actor, proof = proven_actor(caller, q.actor or claimed)
        target = q.user_id or actor
        if target != actor and caller.mcp_admin is None:
            who = svc.rt.identity.user(actor)
            if who is None or not who.admin:
                raise Forbidden(f"{actor!r} may promote into their own memory only; {target!r} is someone else "
                                "(admins of users.yaml may promote for any user)")
        if svc.rt.identity.user(target) is None:
            raise NotFound(f"no user {target!r} in users.yaml")
        limit = svc.rt.settings.promotion.max_chars
        if len(q.text) > limit:
            raise InvalidMessage("text_too_long", f"{len(q.text)} characters; a promoted memory holds at most {limit}")
        group = target_group(q.scope, target, q.agent_id, q.session)
    except Exception:
        metrics.promotions.labels(outcome="refused").inc()
        raise
    memory = Promoted(id=uuid.uuid4().hex, group_id=group, kind=q.kind, scope=q.scope, text=q.text, author=actor,
                      created_at=datetime.now(UTC), session=q.session if q.scope == "session" else None)
    await lifecycle_of(svc.store).add_promoted(memory)
    metrics.promotions.labels(outcome="ok").inc()
    log.info("%s (proven by %s) promoted a %s into %s (scope %s)", actor, proof, q.kind, group, q.scope)
    return memory


async def promoted(svc: MemoryService, group_id: str) -> list[Promoted]:
    return await lifecycle_of(svc.store).promoted(checked_groups([group_id])[0])


async def delete_promoted(svc: MemoryService, group_id: str, memory_id: str) -> None:
    if not await lifecycle_of(svc.store).delete_promoted(checked_groups([group_id])[0], memory_id):
        raise NotFound(f"no promoted memory {memory_id!r} in group {group_id!r}")


async def evict(svc: MemoryService, group_id: str | None, *, dry_run: bool) -> EvictResult:
    """Eviction now, under the configured retention policy: one group, or every group the store holds."""
    groups = [checked_groups([group_id])[0]] if group_id else await svc.all_groups()
    done = await evict_groups(svc.store, groups, policy_of(svc.rt.settings.retention), now=datetime.now(UTC),
                              dry_run=dry_run, trigger="demand", metrics=svc.rt.metrics.lifecycle)
    lost = [GroupEviction(group_id=g, facts=e.facts, entities=e.entities, cutoff=e.cutoff)
            for g, e in done.items() if not e.empty]
    return EvictResult(dry_run=dry_run, facts=sum(e.facts for e in done.values()),
                       entities=sum(e.entities for e in done.values()), groups=lost)


async def evicted_so_far(svc: MemoryService, group_id: str) -> Eviction:
    """The group's eviction totals and cutoff (graph stats read it); nothing evicted on a store without life-cycle."""
    try:
        lifecycle = lifecycle_of(svc.store)
    except TypeError:
        return Eviction()
    return await lifecycle.evicted_so_far(checked_groups([group_id])[0])


async def history_note(svc: MemoryService, group_id: str, as_of: datetime | None) -> dict[str, Any]:
    """The fields an as-of or history answer carries: the group's cutoff, and a note when the answer reaches
    before it (see `engine.retention.cutoff_note`)."""
    cutoff = (await evicted_so_far(svc, group_id)).cutoff
    return {"retention_cutoff": cutoff, "note": cutoff_note(cutoff, as_of)}


def lifecycle_operations(svc: MemoryService) -> dict[str, tuple[type[BaseModel], Callable[[Any], Awaitable[BaseModel]]]]:
    """The NATS endpoints (`memory.api.<name>`) of this module, merged into `nats_service.operations`."""

    async def promote_op(q: PromoteRequest) -> BaseModel:
        return PromotedResult.of(await promote(svc, q))

    async def promoted_op(q: PromotedRequest) -> BaseModel:
        return PromotedList(promoted=[PromotedResult.of(m) for m in await promoted(svc, q.group_id)])

    async def delete_promoted_op(q: DeletePromotedRequest) -> BaseModel:
        await delete_promoted(svc, q.group_id, q.uuid)
        return DeleteResult(message="Promoted memory deleted", success=True)

    async def evict_op(q: EvictRequest) -> BaseModel:
        return await evict(svc, q.group_id, dry_run=q.dry_run)

    return {
        "promote": (PromoteRequest, promote_op),
        "promoted": (PromotedRequest, promoted_op),
        "delete-promoted": (DeletePromotedRequest, delete_promoted_op),
        "evict": (EvictRequest, evict_op),
    }
