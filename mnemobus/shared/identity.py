"""Who is speaking, and which memory groups a request reads and writes.

`workspace/users.yaml` maps platform identities to canonical users. The file
is validated strictly (ids are strings, canonical ids unique, one platform id
maps to one user) and re-read when it changes; a broken edit keeps the last
good registry and says why, so a typo never wipes everyone's identity.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from mnemobus.shared.errors import ConfigError
from mnemobus.shared.groups import GroupId, agent_user_group, system_group, unknown_user_group, user_group

log = logging.getLogger("mnemobus.identity")

#: platforms whose user id may be a canonical id of users.yaml itself (internal publishers and the CLI)
CANONICAL_PLATFORMS = ("bus", "cli")


class User(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)

    id: StrictStr = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,47}$")
    display_name: StrictStr | None = None
    admin: StrictBool = False
    memory_enabled: StrictBool = True
    identities: dict[StrictStr, StrictStr] = Field(default_factory=dict)


class UsersFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    users: list[User] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> "UsersFile":
        seen: dict[str, int] = {}
        owners: dict[tuple[str, str], str] = {}
        for i, u in enumerate(self.users):
            if u.id in seen:
                raise ValueError(f"users.{i}.id: canonical id {u.id!r} is also used by users.{seen[u.id]}")
            seen[u.id] = i
            for platform, pid in u.identities.items():
                key = (platform, pid)
                if key in owners:
                    raise ValueError(f"users.{i}.identities.{platform}: {pid!r} already belongs to user {owners[key]!r}")
                owners[key] = u.id
        return self


def load_users(path: Path) -> UsersFile:
    """Parse and validate; ConfigError names the file, the field and the reason."""
    if not path.exists():
        return UsersFile()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    try:
        return UsersFile.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(file)"
            hint = " (quote platform ids so they stay strings)" if err["type"] == "string_type" else ""
            problems.append(f"field '{loc}': {err['msg']}{hint}")
        raise ConfigError(f"{path}: " + "; ".join(problems)) from exc


@dataclass(frozen=True)
class Resolution:
    """The memory scope of one request; `groups` is empty when memory must not be touched."""

    groups: tuple[GroupId, ...]
    user: User | None
    reason: str  # why these groups (or none): known_user, unknown_user, system_actor, memory_disabled, no_user
    also_read: tuple[GroupId, ...] = ()  # fallback groups from before the user was mapped: read, never written

    @property
    def read_groups(self) -> tuple[GroupId, ...]:
        return self.groups + self.also_read

    @property
    def memory_on(self) -> bool:
        return bool(self.groups)


class IdentityRegistry:
    def __init__(self, path: Path | str, *, on_reload=None) -> None:  # type: ignore[no-untyped-def]
        self.path = Path(path)
        self._on_reload = on_reload
        self._stamp: tuple[float, int] | None = None
        self._users: dict[str, User] = {}
        self._by_identity: dict[tuple[str, str], User] = {}
        self._apply(load_users(self.path))
        self._stamp = self._current_stamp()

    def _current_stamp(self) -> tuple[float, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime, st.st_size)

    def _apply(self, data: UsersFile) -> None:
        self._users = {u.id: u for u in data.users}
        self._by_identity = {(p, pid): u for u in data.users for p, pid in u.identities.items()}

    def maybe_reload(self) -> bool:
        """Re-read the file if it changed. Returns True when a new registry took effect."""
        stamp = self._current_stamp()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            data = load_users(self.path)
        except ConfigError as exc:
            log.error("users file change rejected, keeping the last good registry: %s", exc)
            if self._on_reload:
                self._on_reload("rejected")
            return False
        self._apply(data)
        log.info("users file reloaded: %d users", len(self._users))
        if self._on_reload:
            self._on_reload("ok")
        return True

    @property
    def users(self) -> dict[str, User]:
        return dict(self._users)

    def user(self, user_id: str) -> User | None:
        return self._users.get(user_id)

    def lookup(self, platform: str, platform_id: str) -> User | None:
        return self._by_identity.get((platform, platform_id))

    def resolve(self, platform: str, user_id: str | None, agent_id: str, system_actor: str | None, *,
                trusted: bool = False) -> Resolution:
        """The groups of a request's claimed source.

        A platform identity listed in users.yaml maps to its user. A bare canonical id on the `bus` or `cli`
        platform maps only when the publisher is `trusted` (the bus enforces who may publish, or the caller
        showed the API key): on an open bus anyone can claim to be `cli:josh`, and an unverified claim gets the
        unknown-user groups of that id, never josh's memory."""
        if system_actor:
            return Resolution((system_group(system_actor),), None, "system_actor")
        if not user_id:
            return Resolution((), None, "no_user")
        user = self.lookup(platform, user_id)
        if user is None and trusted and platform in CANONICAL_PLATFORMS:
            user = self._users.get(user_id)
        if user is not None:
            if not user.memory_enabled:
                return Resolution((), user, "memory_disabled")
            base = user_group(user.id)
            # what the user said before being mapped stays reachable: their old fallback groups are read too
            fallbacks = tuple(unknown_user_group(p, pid) for p, pid in sorted(user.identities.items()))
            return Resolution((base, agent_user_group(agent_id, base)), user, "known_user", fallbacks)
        base = unknown_user_group(platform, user_id)
        return Resolution((base, agent_user_group(agent_id, base)), None, "unknown_user")

    def groups_of_user(self, user: User) -> list[GroupId]:
        """The base groups a user's memory may live in, including old fallback ids."""
        groups = [user_group(user.id)] + [unknown_user_group(p, pid) for p, pid in user.identities.items()]
        return groups
