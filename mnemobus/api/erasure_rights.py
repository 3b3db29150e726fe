"""Who may erase a group (DELETE /group, the `delete-group` endpoint, MCP `clear_group`) or everything (POST /clear),
and the audit of each erasure and each refusal.

Why: these were open to any key holder and left no trace. An erasure is now allowed only to someone the service
can name: the owner of the request's key (`api.keys`) when that owner is an admin in users.yaml, or, for one
group, when it is one of the owner's own groups (their `user_<id>`, their old fallback ids, and every per-agent
view of those); the operator role of a bus enforcing per-role permissions (the client role may not publish
`delete-group`, see bus/permissions.py); an MCP client whose token is marked admin. A shared key
(`api.api_key`) proves no one and is refused. A service with no key and an open bus knows no one and checks no
one (as for every other operation there); its erasures are still audited, as by `anonymous`.
"""

from __future__ import annotations

import logging

from mnemobus.api.callers import BY_BUS_ROLE, BY_KEY, Caller
from mnemobus.api.core import Forbidden, MemoryService
from mnemobus.api.gdpr import AuditEvent, audit_subject, groups_of
from mnemobus.engine.recall import checked_groups
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import DeleteCounts

log = logging.getLogger("mnemobus.audit")

#: how an erasure's actor was proven, beside callers.BY_KEY and BY_BUS_ROLE
BY_MCP_TOKEN, UNPROVEN = "mcp-token", "open-service"
#: the operations, as the audit event's kind and the refusal counter's label
DELETE_GROUP, CLEAR = "group_deleted", "graph_cleared"
#: groups one audit event lists: 1,000 ids of at most 128 characters stay under half the bus's 256 KiB payload
AUDIT_MAX_GROUPS = 1000


def _owns(svc: MemoryService, owner: str, group: GroupId) -> bool:
    user = svc.rt.identity.user(owner)
    return user is not None and group in groups_of(svc.rt.identity.groups_of_user(user), [group])


def _actor(svc: MemoryService, caller: Caller, group: GroupId | None) -> tuple[str, str]:
    """(actor, proof) of an erasure of `group` (None: every group), or Forbidden naming what is missing."""
    if caller.owner is not None:
        user = svc.rt.identity.user(caller.owner)
        if user is not None and user.admin:
            return caller.owner, BY_KEY
        if group is not None and _owns(svc, caller.owner, group):
            return caller.owner, BY_KEY
        what = "every group" if group is None else f"group {group!r}"
        raise Forbidden(f"the key's owner {caller.owner!r} may not erase {what}: only admins in users.yaml may, "
                        "and a user only their own groups")
    if caller.mcp_admin is not None:
        return f"mcp:{caller.mcp_admin}", BY_MCP_TOKEN
    if caller.bus_role:
        return "operator", BY_BUS_ROLE
    if caller.keyed:
        raise Forbidden("erasing needs a key of its own: api.api_key is shared and proves no one; give each admin "
                        "a key in api.keys (owner, key) and send that")
    return "anonymous", UNPROVEN


def allowed_actor(svc: MemoryService, caller: Caller, group: GroupId | None) -> tuple[str, str]:
    """`_actor`, with a refusal counted (mnemobus_erasures_refused_total) and logged before it is raised."""
    kind = CLEAR if group is None else DELETE_GROUP
    try:
        return _actor(svc, caller, group)
    except Forbidden as exc:
        svc.rt.metrics.erasures_refused.labels(operation=kind).inc()
        log.warning("audit: refused %s of %s: %s", kind, group or "every group", exc)
        raise


async def _audited(svc: MemoryService, kind: str, actor: str, proof: str, groups: list[str],
                   done: DeleteCounts) -> None:
    """The audit event (the user whose group it was, when one group of a known user went), published and logged."""
    owners = [o for o in svc.rt.identity.users if len(groups) == 1 and _owns(svc, o, GroupId(groups[0]))]
    subject = owners[0] if owners else ""
    # a /clear of a big store names more groups than one bus message holds: the event lists the first ones, the
    # log line says how many there were
    event = AuditEvent(kind=kind, actor=actor, proof=proof, subject_user=subject, groups=groups[:AUDIT_MAX_GROUPS],
                       episodes=done.episodes, entities=done.entities, facts=done.facts, remaining=0)
    log.warning("audit: %s (proven by %s) %s %d group(s)%s: %d episodes, %d entities, %d facts", actor, proof, kind,
                len(groups), f" (the event lists the first {AUDIT_MAX_GROUPS})" if len(groups) > AUDIT_MAX_GROUPS
                else "", done.episodes, done.entities, done.facts)
    await svc.rt.bus.publish(audit_subject(kind), event.to_wire())


async def delete_group_as(svc: MemoryService, caller: Caller, group_id: str) -> DeleteCounts:
    """DELETE /group for `caller`: refused (Forbidden) unless allowed, audited when done."""
    (group,) = checked_groups([group_id])
    actor, proof = allowed_actor(svc, caller, group)
    done = await svc.delete_group(group)
    await _audited(svc, DELETE_GROUP, actor, proof, [group], done)
    return done


async def clear_as(svc: MemoryService, caller: Caller) -> DeleteCounts:
    """POST /clear for `caller`: admins only, audited with the groups it erased."""
    actor, proof = allowed_actor(svc, caller, None)
    groups = await svc.all_groups()
    done = await svc.clear()
    await _audited(svc, CLEAR, actor, proof, list(groups), done)
    return done
