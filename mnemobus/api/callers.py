"""Who a request to the memory API proved to be: the owner of the key it carried, or the role the bus let send it.

Why: an admin action (erasing a user) names its actor in the audit. A name the request carries is only a claim,
and any holder of a shared key could name any admin; the key itself is the proof, so the actor is its owner
(`api.keys`). Without keys, a bus enforcing per-role permissions lets only the operator role send the admin
endpoints, and what it names is believed as that role's word.
"""

from __future__ import annotations

import contextvars
import secrets
from dataclasses import dataclass

from mnemobus.api.core import Forbidden
from mnemobus.shared.config import ApiSettings

#: how a caller's identity was proven, as the audit records it
BY_KEY, BY_BUS_ROLE = "api-key", "bus-role"


@dataclass(frozen=True)
class Caller:
    """`owner`: the users.yaml id the request proved (None: it proved no one); `keyed`: it carried a valid key;
    `bus_role`: it came over a bus that lets only trusted roles send it (`nats.permissions_enforced`); `mcp_admin`: the
    name of the admin MCP client it came from."""

    owner: str | None = None
    keyed: bool = False
    bus_role: bool = False
    mcp_admin: str | None = None  # an MCP client whose token mcp.clients marks admin (the MCP door checked it)
    mcp_client: str | None = None  # the MCP client the request came from, admin or not


class WrongKey(Exception):
    """A service that needs a key got none, or one it does not know."""


def presented_key(authorization: str | None, x_api_key: str | None) -> str:
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return x_api_key or ""


def needs_key(config: ApiSettings) -> bool:
    return config.api_key is not None or bool(config.keys)


def caller_of(config: ApiSettings, authorization: str | None, x_api_key: str | None, *,
              bus_role: bool = False) -> Caller:
    """The caller a request's headers prove; WrongKey when the service needs a key and these carry no known one.

    Every configured key is compared (constant time each), so the time taken does not tell which one matched."""
    if not needs_key(config):
        return Caller(bus_role=bus_role)
    given = presented_key(authorization, x_api_key).encode()
    found: Caller | None = None
    if config.api_key is not None and secrets.compare_digest(given, config.api_key.get_secret_value().encode()):
        found = Caller(keyed=True, bus_role=bus_role)
    for k in config.keys:
        if secrets.compare_digest(given, k.key.get_secret_value().encode()):
            found = Caller(owner=k.owner, keyed=True, bus_role=bus_role)
    if not given or found is None:
        raise WrongKey("missing or wrong API key (send an Authorization: Bearer header)")
    return found


#: the caller of the request being handled: set by the NATS and HTTP doors, read by the admin operations (the
#: operations are shared by every door with one argument, the request body). Unset: nothing is proven
current_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar("current_caller", default=Caller())


def proven_actor(caller: Caller, claimed: str | None) -> tuple[str, str]:
    """(actor, how it was proven) of an admin action, or Forbidden saying what proof is missing.

    A keyed caller acts as the key's owner; a request naming someone else is refused rather than believed. A
    shared key (`api.api_key`) proves no one. Over a bus that lets only the operator role send the admin endpoints,
    the role is the proof of what it claims."""
    if caller.owner is not None:
        if claimed is not None and claimed != caller.owner:
            raise Forbidden(f"the actor is the owner of the API key the request carries ({caller.owner!r}); the "
                            f"request named {claimed!r}")
        return caller.owner, BY_KEY
    if caller.bus_role and claimed is not None:
        return claimed, BY_BUS_ROLE
    if caller.keyed:
        raise Forbidden("an admin action needs a key of its own: api.api_key is shared and proves no one; give "
                        "each admin a key in api.keys (owner, key) and send that")
    raise Forbidden("an admin action needs a service that knows who is asking: give each admin a key in api.keys "
                    "(callers send it) or run the bus with per-role permissions (nats.permissions_enforced)")
