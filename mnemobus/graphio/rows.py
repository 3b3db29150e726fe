"""One stored row as a JSON object and back: the line format of `mnemobus graph export --format jsonl`.

The export must rebuild a group exactly (ids, both time axes, provenance, supersession, embeddings), so a
row is its dataclass field for field; embeddings travel as base64 of little-endian float32, which is exact
and a third of the size of decimal text. Reading a row back validates every field with pydantic against
the same dataclass the stores take, and refuses a naive time: a store compares times as UTC.
"""

from __future__ import annotations

import base64
import dataclasses
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from pydantic import TypeAdapter, ValidationError

from mnemobus.shared.errors import InvalidMessage
from mnemobus.shared.groups import InvalidGroupId, validate_group_id
from mnemobus.store.model import Entity, Episode, Fact, Vector

FORMAT = "mnemobus-export"
VERSION = 1

T = TypeVar("T", Entity, Episode, Fact)
_ADAPTERS: dict[type, TypeAdapter[Any]] = {cls: TypeAdapter(cls) for cls in (Entity, Episode, Fact)}


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple):
        return list(value)
    return value


def vector_text(vec: Vector | None) -> str | None:
    return None if vec is None else base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")


def vector_of(text: object) -> Vector | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidMessage("invalid_row", "embedding must be base64 text or null")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise InvalidMessage("invalid_row", f"embedding is not base64: {exc}") from exc
    if len(raw) % 4:
        raise InvalidMessage("invalid_row", "embedding is not a whole number of float32 values")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def row_of(kind: str, item: Entity | Episode | Fact, **extra: Any) -> dict[str, Any]:
    """The JSON object of one row: `kind`, the dataclass's fields, then `extra` (embedding, screened, ...)."""
    body = {f.name: _plain(getattr(item, f.name)) for f in dataclasses.fields(item)}
    return {"kind": kind, **body, **extra}


def item_of(cls: type[T], row: dict[str, Any]) -> T:
    """The dataclass a row holds, validated; InvalidMessage names the field and the reason."""
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        item: T = _ADAPTERS[cls].validate_python({k: v for k, v in row.items() if k in names})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or cls.__name__
        raise InvalidMessage("invalid_row", f"{cls.__name__.lower()} {where}: {first['msg']}") from None
    for name in names:
        value = getattr(item, name)
        if isinstance(value, datetime) and value.tzinfo is None:
            raise InvalidMessage("invalid_row", f"{cls.__name__.lower()} {name}: a time needs its UTC offset")
    try:
        validate_group_id(item.group_id)
    except InvalidGroupId as exc:
        raise InvalidMessage("invalid_group_id", str(exc)) from None
    return item


def header(group_id: str, counts: dict[str, int], exported_at: datetime) -> dict[str, Any]:
    """The first line of an export: what it is and what it holds, so a reader can check it got all of it."""
    from mnemobus import __version__

    return {"kind": "group", "format": FORMAT, "v": VERSION, "group_id": group_id,
            "exported_at": exported_at.isoformat(), "mnemobus": __version__, **counts}
