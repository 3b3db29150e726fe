"""The sizes every door agrees on, so nothing is accepted at one door that a later stage refuses.

A message the API or the plugin accepts becomes an episode the worker
stores; if the doors allowed more than the worker keeps, a 202 would turn
into a dead letter later. One constant per limit, imported wherever it is checked.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from pydantic import AfterValidator, Field

#: characters of one message (a request's content, an episode's content or response) memory stores
MAX_CONTENT_CHARS = 64_000
#: characters of a search query; a longer request is cut to its last MAX_QUERY_CHARS for recall
MAX_QUERY_CHARS = 4_000
#: bytes of one HTTP request body
MAX_HTTP_BODY_BYTES = 8 * 1024 * 1024
#: appended to a stored text that had to be cut to MAX_CONTENT_CHARS
TRUNCATION_MARK = " […truncated]"


def clip(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    """`text` cut to `limit` characters, marked when it was cut."""
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATION_MARK)] + TRUNCATION_MARK


def clip_bytes(text: str, max_bytes: int) -> str:
    """`text` cut to at most `max_bytes` bytes of UTF-8 (at a character boundary), marked when it was cut: a
    message's limit on the bus is in bytes, and a character of UTF-8 takes up to four."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    keep = max(0, max_bytes - len(TRUNCATION_MARK.encode()))
    return raw[:keep].decode("utf-8", "ignore") + TRUNCATION_MARK


def query_tail(text: str) -> str:
    """The part of a long text recall searches with: its end, where a question after a pasted log usually is."""
    return text[-MAX_QUERY_CHARS:]


def _has_text(value: str) -> str:
    if not value.strip():
        raise ValueError("content is only whitespace; there is nothing to remember")
    return value


#: a message memory will store: 1..MAX_CONTENT_CHARS characters, not only whitespace
StoredText = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS), AfterValidator(_has_text)]


def lone_surrogate(value: object, path: str = "") -> str | None:
    """Where in a decoded JSON value a string holds a lone surrogate (valid JSON, never storable), if anywhere."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{path or '(value)'} holds a lone surrogate at position {exc.start}"
        return None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)  # type: ignore[assignment]
    else:
        return None
    for key, item in items:
        found = lone_surrogate(key, path) if isinstance(key, str) else None
        found = found or lone_surrogate(item, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def _in_calendar(value: datetime) -> datetime:
    try:
        (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise ValueError(f"{value.isoformat()} is outside years 1 to 9999 once in UTC, the range memory stores "
                         "times in") from None
    return value


#: a time memory stores or compares: in UTC within years 1..9999 (an offset can push 0001-01-01 into year 0)
Moment = Annotated[datetime, AfterValidator(_in_calendar)]
