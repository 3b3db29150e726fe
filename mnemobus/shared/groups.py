"""Group-id rules: the only place a GroupId is made.

A group id is the isolation boundary of memory, so every id that reaches a
store passes through here. Unsafe input is sanitised deterministically and
collision-free: if anything had to change, a short hash of the original is
appended, so two different inputs never map to the same group.
"""

from __future__ import annotations

import hashlib
import re
from typing import NewType

GroupId = NewType("GroupId", str)

GROUP_ID_RE = re.compile(r"[A-Za-z0-9_-]+")  # always used with fullmatch: "$" would let a trailing newline through
MAX_GROUP_ID_LEN = 128
_SEGMENT_MAX = 48
_UNSAFE = re.compile(r"[^A-Za-z0-9-]+")


#: the same rule for JSON Schema / OpenAPI (pydantic's regex engine has no trailing-newline '$' quirk)
GROUP_ID_PATTERN = r"^[A-Za-z0-9-][A-Za-z0-9_-]*$"
#: ids starting with it are the system's own groups, never a caller's: the dead letters no group could be read
#: from (`_unrouted`: deleting that group would purge them all) and any the system may need later
RESERVED_PREFIX = "_"


class InvalidGroupId(ValueError):
    """A group id given by a caller breaks the group-id rules."""


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def sanitize_segment(value: str) -> str:
    """One identity segment (user id, platform id, agent, actor) made safe.

    Underscores are replaced too: they separate segments, so a raw underscore
    inside a segment could make two different identities collide.
    """
    raw = str(value)
    safe = _UNSAFE.sub("-", raw).strip("-")
    if safe == raw and 0 < len(safe) <= _SEGMENT_MAX:
        return safe
    safe = safe[: _SEGMENT_MAX - 9].rstrip("-") or "x"
    return f"{safe}-{_digest(raw)}"


def validate_group_id(value: object) -> GroupId:
    """Accept an id only as it is; callers' ids are never silently rewritten."""
    if not isinstance(value, str):
        raise InvalidGroupId(f"group id must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidGroupId("group id is empty")
    if len(value) > MAX_GROUP_ID_LEN:
        raise InvalidGroupId(f"group id is {len(value)} characters long; the limit is {MAX_GROUP_ID_LEN}")
    if not GROUP_ID_RE.fullmatch(value):
        bad = sorted({c for c in value if not re.match(r"[A-Za-z0-9_-]", c)})
        raise InvalidGroupId(
            f"group id {value!r} contains {''.join(bad)!r}; only letters, digits, '_' and '-' are allowed"
        )
    if value.startswith(RESERVED_PREFIX):
        raise InvalidGroupId(f"group id {value!r} is reserved: ids starting with {RESERVED_PREFIX!r} are the "
                             "system's own (e.g. '_unrouted', the dead letters of no group)")
    return GroupId(value)


def user_group(user_id: str) -> GroupId:
    return GroupId(f"user_{sanitize_segment(user_id)}")


def unknown_user_group(platform: str, platform_id: str) -> GroupId:
    return GroupId(f"user_{sanitize_segment(platform)}_{sanitize_segment(platform_id)}")


def agent_user_group(agent_id: str, user_group_id: GroupId) -> GroupId:
    """Per-agent view of a user; the double underscore keeps it apart from the fallback form."""
    return GroupId(f"agent_{sanitize_segment(agent_id)}__{user_group_id}")


def system_group(actor: str) -> GroupId:
    return GroupId(f"system_{sanitize_segment(actor)}")
