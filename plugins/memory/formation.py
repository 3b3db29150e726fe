"""Formation gates: when a session's exchanges become an episode.

The default (every exchange) buffers nothing, so nothing can be lost. With
a gate of N messages or M tokens, exchanges of one session (group, channel)
wait in memory until the gate opens, the session goes cold, or the process
drains; a crash in that window loses the buffered turns, which is why the
gate is opt-in and README says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.shared.limits import clip
from mnemobus.store.model import episode_id_for


def approx_tokens(text: str) -> int:
    """~4 characters a token, the usual rule of thumb; gates need no tokenizer."""
    return max(1, len(text) // 4)


@dataclass
class _Session:
    turns: list[EpisodeMessage] = field(default_factory=list)
    tokens: int = 0
    last: float = 0.0


class FormationGate:
    def __init__(self, every_n_messages: int = 1, every_n_tokens: int = 0, cold_after_s: float = 600) -> None:
        self.every_n = every_n_messages
        self.every_tokens = every_n_tokens
        self.cold_after_s = cold_after_s
        self._sessions: dict[tuple[str, str], _Session] = {}

    @property
    def buffering(self) -> bool:
        return self.every_n > 1 or self.every_tokens > 0

    def offer(self, turn: EpisodeMessage, now: float | None = None) -> EpisodeMessage | None:
        """Add one exchange; return the episode to emit when the gate opens."""
        if not self.buffering:
            return turn
        key = (turn.group_id, turn.channel_id or "")
        session = self._sessions.setdefault(key, _Session())
        session.turns.append(turn)
        session.tokens += approx_tokens(turn.content) + approx_tokens(turn.response or "")
        session.last = time.monotonic() if now is None else now
        if len(session.turns) >= self.every_n or (self.every_tokens and session.tokens >= self.every_tokens):
            del self._sessions[key]
            return merge(session.turns)
        return None

    def sweep(self, now: float | None = None, *, everything: bool = False) -> list[EpisodeMessage]:
        """Episodes for sessions that went cold (or all of them, on drain)."""
        now = time.monotonic() if now is None else now
        cold = [k for k, s in self._sessions.items() if everything or now - s.last >= self.cold_after_s]
        return [merge(self._sessions.pop(k).turns) for k in cold]


def merge(turns: list[EpisodeMessage]) -> EpisodeMessage:
    """One episode for a window of exchanges; its id derives from the first turn, so replays stay idempotent."""
    if len(turns) == 1:
        return turns[0]
    first = turns[0]
    content = "\n".join(t.content for t in turns)
    response = "\n".join(t.response for t in turns if t.response) or None
    return first.model_copy(update={
        "episode_id": episode_id_for(first.group_id, first.source_message_id, "window"),
        "content": clip(content),
        "response": clip(response) if response else None,
    })
