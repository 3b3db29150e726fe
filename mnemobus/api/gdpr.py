"""Hard delete of a user (GDPR erasure): every group, cascading, in the store and on the bus.

A user's memory lives in their base groups (`user_<id>` and the fallback
ids of their platform identities) and in every per-agent view of those
(`agent_<agent>__<base>`). All of them go: episodes, entities, facts,
provenance links and embeddings through `GraphStore.delete_group`, and the
episodes and dead letters still queued on JetStream by a purge, so a
replay cannot bring anything back. The audit event says who, when, which
groups and how many rows, never what they contained.
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import Field

from mnemobus.api.core import Forbidden, MemoryService, NotFound
from mnemobus.shared.envelope import ENVELOPE_VERSION, WireModel, new_id, utcnow
from mnemobus.shared.groups import GroupId

log = logging.getLogger("mnemobus.audit")

#: where audit events go (core NATS; subscribe to `memory.audit.>` to keep them)
AUDIT_PREFIX = "memory.audit"


def audit_subject(kind: str) -> str:
    return f"{AUDIT_PREFIX}.{kind}"


class AuditEvent(WireModel):
    """What an erasure did, without any of the erased content."""

    v: int = ENVELOPE_VERSION
    id: str = Field(default_factory=new_id)
    kind: str
    actor: str
    proof: str = Field(default="api-key", description="how the actor was proven: `api-key` (the key's owner) or "
                       "`bus-role` (sent by the operator role of a bus enforcing per-role permissions)")
    subject_user: str
    at: datetime = Field(default_factory=utcnow)
    groups: list[str]
    episodes: int
    entities: int
    facts: int
    remaining: int = Field(description="rows of the user's groups still in the store afterwards; 0 when complete")


def groups_of(base: list[GroupId], existing: list[GroupId]) -> list[GroupId]:
    """The base groups plus every stored per-agent view of one of them."""
    suffixes = tuple(f"__{b}" for b in base)
    return list(dict.fromkeys([*base, *(g for g in existing if g.endswith(suffixes))]))


def require_admin(svc: MemoryService, actor: str) -> None:
    who = svc.rt.identity.user(actor)
    if who is None or not who.admin:
        raise Forbidden(f"{actor!r} is not an admin in users.yaml; only admins may delete a user's memory")


async def hard_delete_user(svc: MemoryService, user_id: str, *, actor: str, proof: str) -> AuditEvent:
    """Erase everything of a known user; `actor` (proven by `proof`, see callers.proven_actor) must be an admin.
    Publishes and logs the audit event."""
    require_admin(svc, actor)
    user = svc.rt.identity.user(user_id)
    if user is None:
        raise NotFound(f"no user {user_id!r} in users.yaml")
    groups = groups_of(svc.rt.identity.groups_of_user(user), await svc.all_groups())
    done = await svc.delete_groups(groups)  # all or nothing (store.delete_groups): never half a user
    await svc.store.erase_residue()
    remaining = 0
    for group in groups:
        remaining += await svc.store.count_episodes(group) + await svc.store.count_facts(group)
    event = AuditEvent(kind="user_deleted", actor=actor, proof=proof, subject_user=user_id, groups=list(groups),
                       episodes=done.episodes, entities=done.entities, facts=done.facts, remaining=remaining)
    log.warning("audit: %s (proven by %s) erased user %s: %d groups, %d episodes, %d entities, %d facts, %d remaining",
                actor, proof, user_id, len(groups), done.episodes, done.entities, done.facts, remaining)
    await svc.rt.bus.publish(audit_subject(event.kind), event.to_wire())
    return event
