"""Helpers shared by the engine tests (plain functions, importable from any test module here)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from mnemobus.engine.embed import HashEmbedder
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode, episode_id_for

T0 = datetime(2026, 6, 1, tzinfo=UTC)
_counter = itertools.count()


def make_episode(group: str, content: str, *, at: datetime = T0, days: float = 0, msg: str | None = None) -> Episode:
    msg = msg or f"m{next(_counter)}"
    return Episode(id=episode_id_for(group, msg, "user"), group_id=GroupId(group), content=content, role="user",
                   source_message_id=msg, reference_time=at + timedelta(days=days))


class CountingEmbedder(HashEmbedder):
    """The hashing embedder, recording every call it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts)
