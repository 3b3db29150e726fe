"""Helpers shared by the engine tests (plain functions, importable from any test module here)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode, episode_id_for

T0 = datetime(2026, 6, 1, tzinfo=UTC)
_counter = itertools.count()


def make_episode(group: str, content: str, *, at: datetime = T0, days: float = 0, msg: str | None = None) -> Episode:
    msg = msg or f"m{next(_counter)}"
    return Episode(id=episode_id_for(group, msg, "user"), group_id=GroupId(group), content=content, role="user",
                   source_message_id=msg, reference_time=at + timedelta(days=days))
