"""Every subject, stream and durable name in one place.

Names are built by functions so a typo is a NameError, not a silent
subscription to nothing, and so README can list them from one source.
"""

from __future__ import annotations

import re

from mnemobus.shared.groups import GroupId

SKILL_REQUEST = "agent.skill.request"
SKILL_EXECUTE_PREFIX = "agent.skill.execute"
SKILL_RESPONSE_PREFIX = "agent.skill.response"
EPISODE_PREFIX = "memory.episode"
DLQ_PREFIX = "memory.dlq"
API_PREFIX = "memory.api"
HEARTBEAT_PREFIX = "memory.heartbeat"
GOAL_PREFIX = "worldstate.goal"

EPISODE_STREAM = "MEMORY_EPISODES"
DLQ_STREAM = "MEMORY_DLQ"
WORKER_DURABLE = "memory-worker"
PLUGIN_QUEUE = "memory-plugin"

#: Dead letters whose group could not be determined (the message never parsed).
UNROUTED_GROUP = "_unrouted"


_PUBLISH_SUBJECT = re.compile(r"[^\s.*>]+(?:\.[^\s.*>]+)*")
#: where a caller-named reply may not go: our own subjects (a reply there would be taken for an episode, a request,
#: a dead letter...) and the server's
_RESERVED_PREFIXES = ("agent.skill.", "memory.", "worldstate.", "$")


#: the first token of the reply inboxes of a connection without a NATS user (nats-py's default)
INBOX_PREFIX = "_INBOX"


def inbox_root(user: str) -> str:
    """`_INBOX_<user>`: the first token of every reply inbox of `user`'s connections.

    Why per user: NATS delivers a request's reply, and a pull consumer's messages, to the requester's inbox;
    with one shared `_INBOX.>` anyone allowed to subscribe there reads every user's replies. A user granted only
    `_INBOX_<user>.>` receives its own."""
    return f"{INBOX_PREFIX}_{_token(user, 'NATS user')}"


def inbox_prefix(user: str | None, instance: str) -> str:
    """The `inbox_prefix` a connection of `user` (None: no user) from process `instance` connects with."""
    if user is None:
        return INBOX_PREFIX
    return f"{inbox_root(user)}.{re.sub(r'[^A-Za-z0-9_-]', '_', instance) or '_'}"


def check_reply_subject(value: str) -> str:
    """A subject a caller asks us to publish its reply on: one concrete subject outside our namespaces."""
    if len(value) > 256 or not _PUBLISH_SUBJECT.fullmatch(value):
        raise ValueError(f"{value[:80]!r} is not a NATS subject one can publish on (no spaces, wildcards or empty tokens)")
    if value.startswith(_RESERVED_PREFIXES):
        raise ValueError(f"replies may not be published under {', '.join(_RESERVED_PREFIXES)}: {value[:80]!r}")
    return value


def _token(value: str, what: str) -> str:
    if not value or any(c in value for c in " .*>\t\r\n"):
        raise ValueError(f"{what} {value!r} is not a valid NATS subject token")
    return value


def skill_execute(agent_id: str) -> str:
    return f"{SKILL_EXECUTE_PREFIX}.{_token(agent_id, 'agent id')}"


def skill_response(agent_id: str) -> str:
    return f"{SKILL_RESPONSE_PREFIX}.{_token(agent_id, 'agent id')}"


def episode(group_id: GroupId) -> str:
    return f"{EPISODE_PREFIX}.{group_id}"


def dlq(group_id: str) -> str:
    return f"{DLQ_PREFIX}.{_token(group_id, 'group id')}"


def api(endpoint: str) -> str:
    """`memory.api.<endpoint>`; a dotted endpoint (graph.stats) is one token per part."""
    return ".".join([API_PREFIX, *(_token(part, "endpoint") for part in endpoint.split("."))])


def heartbeat(role: str) -> str:
    return f"{HEARTBEAT_PREFIX}.{_token(role, 'role')}"


def goal(goal_id: str) -> str:
    """Goal ids are dotted (`memory.worker_alive`); each part must be a valid token."""
    for part in goal_id.split("."):
        _token(part, "goal id part")
    return f"{GOAL_PREFIX}.{goal_id}"


ALL = {
    "request": SKILL_REQUEST,
    "execute": f"{SKILL_EXECUTE_PREFIX}.<agentId>",
    "response": f"{SKILL_RESPONSE_PREFIX}.<agentId>",
    "episode": f"{EPISODE_PREFIX}.<group_id>",
    "dlq": f"{DLQ_PREFIX}.<group_id>",
    "api": f"{API_PREFIX}.<endpoint>",
    "heartbeat": f"{HEARTBEAT_PREFIX}.<role>",
    "goal": f"{GOAL_PREFIX}.<goal_id>",
}

HEARTBEAT_BUCKET = "MEMORY_HEARTBEATS"


def heartbeat_key(role: str, instance: str) -> str:
    return f"{_token(role, 'role')}.{_token(instance, 'instance')}"
