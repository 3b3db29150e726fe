"""Who may publish and subscribe where: one NATS user per role, so a subject is written only by its role.

The components (plugin, worker, api, worldstate) run our own code and hold the JetStream API they need to
create their streams and consumers. The parties around them get only their door: a publisher sends
`agent.skill.request`, an executor answers `agent.skill.execute.*`, a client calls the memory API but not its
identity-bearing endpoints (`command`, `delete-user`) nor `delete-group`, which an operator may. With these in
force (`nats.permissions_enforced`), the identity a request claims comes from a publisher trusted to claim it.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

from mnemobus.shared import subjects

#: the one user of an embedded server: the process that started it
EMBEDDED_USER = "mnemobus"
#: the memory API endpoints that act on an identity the message names, or erase a group (api/erasure_rights.py)
ADMIN_ENDPOINTS = ("command", "delete-user", "delete-group")


#: a responder may publish one message to the reply subject of each request it received, within this time (the
#: server's own default, written out); NATS cannot narrow *which* reply subject a requester names (a publish deny
#: does not apply to responses), so the memory API and the plugin check it themselves (`forged_reply`)
RESPONSES = {"max": 1, "expires": "2m"}


@dataclass(frozen=True)
class Permissions:
    """A nats-server user's permissions; `responds` lets it answer requests made to what it subscribes."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = ()
    responds: bool = False
    about: str = field(default="", compare=False)

    def to_server(self) -> dict[str, object]:
        pub: dict[str, object] = {"allow": list(self.publish) or [">"]}
        if not self.publish:  # nothing allowed: nats-server reads an empty allow list as "everything"
            pub = {"deny": [">"]}
        elif self.deny_publish:
            pub["deny"] = list(self.deny_publish)
        body: dict[str, object] = {"publish": pub, "subscribe": {"allow": list(self.subscribe)}}
        if self.responds:
            body["allow_responses"] = dict(RESPONSES)
        return body


_EPISODES = f"{subjects.EPISODE_PREFIX}.>"
_DLQ = f"{subjects.DLQ_PREFIX}.>"
_API = f"{subjects.API_PREFIX}.>"
_EPISODE_STREAM, _DLQ_STREAM = subjects.EPISODE_STREAM, subjects.DLQ_STREAM
_KV_STREAM = f"KV_{subjects.HEARTBEAT_BUCKET}"
_DURABLE = f"{_EPISODE_STREAM}.{subjects.WORKER_DURABLE}"


def _inbox(role: str) -> str:
    """The replies of `role`'s own requests and fetches (its connections' `inbox_prefix`), nobody else's."""
    return f"{subjects.inbox_root(role)}.>"


def _js(*operations: str) -> tuple[str, ...]:
    """JetStream API subjects, one operation on one stream or consumer each: `$JS.API.>` would also let a role
    read any stream back by sequence (`STREAM.MSG.GET`) or consume it through a consumer of its own."""
    return tuple(f"$JS.API.{op}" for op in operations)


#: declaring our two streams (every component does at start, idempotently); the answer is the stream's
#: configuration and counts, never a message
_DECLARE = _js(*(f"STREAM.{op}.{stream}" for stream in (_EPISODE_STREAM, _DLQ_STREAM) for op in ("CREATE", "UPDATE")))
#: the worker's durable consumer: declared, read about, fetched from, acked; nothing else of the stream
_WORKER_CONSUMER = (*_js(f"CONSUMER.DURABLE.CREATE.{_DURABLE}", f"CONSUMER.CREATE.{_DURABLE}",
                         f"CONSUMER.CREATE.{_DURABLE}.>", f"CONSUMER.INFO.{_DURABLE}", f"CONSUMER.MSG.NEXT.{_DURABLE}"),
                    f"$JS.ACK.{_DURABLE}.>")
_HEARTBEAT_WRITE = (*_js(f"STREAM.CREATE.{_KV_STREAM}", f"STREAM.UPDATE.{_KV_STREAM}", f"STREAM.INFO.{_KV_STREAM}"),
                    f"$KV.{subjects.HEARTBEAT_BUCKET}.worker.>")
#: reading the heartbeat bucket (keys through an ephemeral ordered consumer, values by sequence or directly)
_HEARTBEAT_READ = _js(f"STREAM.INFO.{_KV_STREAM}", f"CONSUMER.CREATE.{_KV_STREAM}", f"CONSUMER.CREATE.{_KV_STREAM}.>",
                      f"CONSUMER.INFO.{_KV_STREAM}.*", f"CONSUMER.DELETE.{_KV_STREAM}.*",
                      f"STREAM.MSG.GET.{_KV_STREAM}", f"DIRECT.GET.{_KV_STREAM}", f"DIRECT.GET.{_KV_STREAM}.>")
_STREAM_INFO = _js(f"STREAM.INFO.{_EPISODE_STREAM}", f"STREAM.INFO.{_DLQ_STREAM}", f"CONSUMER.INFO.{_DURABLE}")

ROLES: dict[str, Permissions] = {
    "plugin": Permissions(
        publish=(f"{subjects.SKILL_EXECUTE_PREFIX}.>", f"{subjects.SKILL_RESPONSE_PREFIX}.>", _EPISODES, _DLQ,
                 *_DECLARE, *_HEARTBEAT_READ),
        subscribe=(subjects.SKILL_REQUEST, _inbox("plugin")), responds=True,
        about="enriches agent.skill.request, calls the executor, emits episodes"),
    "worker": Permissions(
        publish=(_DLQ, f"{subjects.HEARTBEAT_PREFIX}.>", *_DECLARE, *_WORKER_CONSUMER, *_HEARTBEAT_WRITE,
                 *_HEARTBEAT_READ),
        subscribe=(_inbox("worker"),),
        about="stores episodes from its durable consumer; dead letters, heartbeats"),
    "api": Permissions(
        publish=(_EPISODES, _DLQ, "memory.audit.>", *_DECLARE, *_HEARTBEAT_READ,
                 *_js(f"STREAM.PURGE.{_EPISODE_STREAM}", f"STREAM.PURGE.{_DLQ_STREAM}")),
        subscribe=(_API, "$SRV.>", _inbox("api")), responds=True,
        about="the memory service: memory.api.* and its $SRV discovery; POST /messages emits episodes; reads the heartbeat bucket to check its store is the workers' (issue 41)"),
    "worldstate": Permissions(
        publish=(f"{subjects.GOAL_PREFIX}.>", _EPISODES, *_DECLARE, *_STREAM_INFO, *_HEARTBEAT_READ),
        subscribe=(f"{subjects.HEARTBEAT_PREFIX}.>", _inbox("worldstate")),
        about="probes streams and heartbeats, sends flow canaries as episodes, announces goal transitions"),
    "publisher": Permissions(
        publish=(subjects.SKILL_REQUEST,), subscribe=(_inbox("publisher"), f"{subjects.SKILL_RESPONSE_PREFIX}.>"),
        about="a chat adapter or service: sends agent.skill.request and is believed about who speaks"),
    "executor": Permissions(
        publish=(), subscribe=(f"{subjects.SKILL_EXECUTE_PREFIX}.>",), responds=True,
        about="an agent: answers agent.skill.execute.<agentId>, publishes nothing else"),
    "client": Permissions(
        publish=(_API,), deny_publish=tuple(subjects.api(e) for e in ADMIN_ENDPOINTS),
        subscribe=(_inbox("client"),),
        about="calls the memory API, except the endpoints that act on a named identity or erase a group"),
    "operator": Permissions(
        publish=(_API, _DLQ, _EPISODES, *_DECLARE, *_STREAM_INFO, *_js(
            "INFO", f"STREAM.MSG.GET.{_DLQ_STREAM}", f"STREAM.MSG.DELETE.{_DLQ_STREAM}", f"STREAM.PURGE.{_DLQ_STREAM}")),
        subscribe=(_inbox("operator"), "memory.>", f"{subjects.GOAL_PREFIX}.>"),
        about="the mnemobus CLI of an operator: every memory API endpoint, dead letters and their replay"),
}


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching: `*` is one token, a final `>` one or more."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


def may_publish(role: str, subject: str) -> bool:
    """Whether the server lets `role` publish on `subject` (responses aside)."""
    perms = ROLES[role]
    return (any(subject_matches(p, subject) for p in perms.publish)
            and not any(subject_matches(p, subject) for p in perms.deny_publish))


def forged_reply(subject: str, reply: str) -> str | None:
    """The role whose inbox `reply` is, when that role cannot have sent a request on `subject`; else None.

    Why: the server lets a responder answer whatever reply subject a request names, so a client could name the
    worker's fetch inbox (or another role's) and have our answer delivered there. Replies go to the requester's
    `_INBOX_<role>.` inbox; a request that names the inbox of a role not allowed to send it was sent by someone
    else, and is not answered."""
    root, dot, _ = reply.partition(".")
    if not dot or not root.startswith(f"{subjects.INBOX_PREFIX}_"):
        return None
    role = root.removeprefix(f"{subjects.INBOX_PREFIX}_")
    if role in ROLES and not may_publish(role, subject):
        return role
    return None


def generated_passwords(roles: list[str] | None = None) -> dict[str, str]:
    """A fresh random password per role (32 url-safe characters of `secrets`)."""
    return {role: secrets.token_urlsafe(24) for role in (roles or list(ROLES))}


def nats_single_user(user: str, password: str) -> str:
    """The `authorization` block of a server only one user may use, with every permission (the embedded server)."""
    return "authorization " + json.dumps({"user": user, "password": password}) + "\n"


def nats_authorization(passwords: dict[str, str]) -> str:
    """The `authorization` block of a nats-server config giving each role (user = role name) its permissions.

    JSON is valid nats-server config syntax, and quoting every string keeps `$`, `>` and `*` literal."""
    unknown = sorted(set(passwords) - set(ROLES))
    if unknown:
        raise ValueError(f"no such role(s): {', '.join(unknown)}; known: {', '.join(ROLES)}")
    users = [{"user": role, "password": password, "permissions": ROLES[role].to_server()}
             for role, password in passwords.items()]
    return "authorization " + json.dumps({"users": users}, indent=2) + "\n"
