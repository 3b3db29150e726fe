"""Who may publish and subscribe where: one NATS user per role, so a subject is written only by its role.

The components (plugin, worker, api, worldstate) run our own code and hold the JetStream API they need to
create their streams and consumers. The parties around them get only their door: a publisher sends
`agent.skill.request`, an executor answers `agent.skill.execute.*`, a client calls the memory API but not its
identity-bearing endpoints (`command`, `delete-user`), which an operator may. With these in force
(`nats.permissions_enforced`), the identity a request claims comes from a publisher trusted to claim it.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

from mnemobus import subjects

#: what every connection needs to receive replies to its own requests
_INBOX = "_INBOX.>"
_JS_API = "$JS.API.>"
#: the one user of an embedded server: the process that started it
EMBEDDED_USER = "mnemobus"
#: the memory API endpoints that act on an identity the message names
ADMIN_ENDPOINTS = ("command", "delete-user")


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
            body["allow_responses"] = True
        return body


_EPISODES = f"{subjects.EPISODE_PREFIX}.>"
_DLQ = f"{subjects.DLQ_PREFIX}.>"
_API = f"{subjects.API_PREFIX}.>"

ROLES: dict[str, Permissions] = {
    "plugin": Permissions(
        publish=(f"{subjects.SKILL_EXECUTE_PREFIX}.>", f"{subjects.SKILL_RESPONSE_PREFIX}.>", _EPISODES, _DLQ,
                 _JS_API),
        subscribe=(subjects.SKILL_REQUEST, _INBOX), responds=True,
        about="enriches agent.skill.request, calls the executor, emits episodes"),
    "worker": Permissions(
        publish=(_DLQ, f"{subjects.HEARTBEAT_PREFIX}.>", f"$KV.{subjects.HEARTBEAT_BUCKET}.>", "$JS.ACK.>",
                 _JS_API),
        subscribe=(_INBOX,),
        about="stores episodes from its durable consumer; dead letters, heartbeats"),
    "api": Permissions(
        publish=(_EPISODES, _DLQ, "memory.audit.>", _JS_API),
        subscribe=(_API, "$SRV.>", _INBOX), responds=True,
        about="the memory service: memory.api.* and its $SRV discovery; POST /messages emits episodes"),
    "worldstate": Permissions(
        publish=(f"{subjects.GOAL_PREFIX}.>", _EPISODES, _JS_API),
        subscribe=(f"{subjects.HEARTBEAT_PREFIX}.>", _INBOX),
        about="probes streams and heartbeats, sends flow canaries as episodes, announces goal transitions"),
    "publisher": Permissions(
        publish=(subjects.SKILL_REQUEST,), subscribe=(_INBOX, f"{subjects.SKILL_RESPONSE_PREFIX}.>"),
        about="a chat adapter or service: sends agent.skill.request and is believed about who speaks"),
    "executor": Permissions(
        publish=(), subscribe=(f"{subjects.SKILL_EXECUTE_PREFIX}.>",), responds=True,
        about="an agent: answers agent.skill.execute.<agentId>, publishes nothing else"),
    "client": Permissions(
        publish=(_API,), deny_publish=tuple(subjects.api(e) for e in ADMIN_ENDPOINTS), subscribe=(_INBOX,),
        about="calls the memory API, except the endpoints that act on a named identity"),
    "operator": Permissions(
        publish=(_API, _DLQ, _EPISODES, _JS_API), subscribe=(_INBOX, "memory.>", f"{subjects.GOAL_PREFIX}.>"),
        about="the mnemobus CLI of an operator: every memory API endpoint, dead letters and their replay"),
}


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
