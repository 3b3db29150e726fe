"""The turn said just before an episode in its conversation, for an extractor that resolves "she" and "he" to the
person that turn named.

Why: a conversation names someone once ("my sister Ana lives in York") and goes on with pronouns ("She moved to
Leeds"). Within one batch the offline extractor carries the person last named from turn to turn; a turn that is
the first of its conversation in a batch (every message POST /messages or the plugin sends on its own) had no one
to carry, so its pronoun named nobody and the fact was lost. The previous turn is already in the store: one read
of the group's newest episodes, only for turns that need it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from mnemobus.engine.extract import Extraction
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import Episode

#: the pronouns a previous turn can resolve (a person; "they" and "it" name too many things to guess)
_THIRD_PERSON = re.compile(r"\b(?:she|he|her|him|his|hers)\b", re.IGNORECASE)
#: how many of a group's newest episodes are read to find the one before (other conversations of the group may
#: have spoken since)
LOOK_BACK = 8


@runtime_checkable
class PreviousTurnReader(Protocol):
    """Optional: an extractor that reads each episode after the turn said before it, when there is one."""

    async def extract_after(self, episodes: Sequence[Episode], previous: Sequence[Episode | None]
                            ) -> list[Extraction | Exception]:
        """One extraction per episode, in order; `previous[i]` is the turn before `episodes[i]` (None: none
        was looked up, the batch itself holds it, or the conversation has none)."""


def wants_previous(episode: Episode) -> bool:
    """Does the episode say "she" or "he" (cheap: most turns do not, and those cost no read)?"""
    return _THIRD_PERSON.search(episode.content) is not None


def before(episode: Episode, candidates: Sequence[Episode]) -> Episode | None:
    """The latest of `candidates` said before `episode` in the same conversation (group and channel)."""
    earlier = [c for c in candidates if c.id != episode.id and c.group_id == episode.group_id
               and c.channel_id == episode.channel_id and c.reference_time <= episode.reference_time]
    return max(earlier, key=lambda c: c.reference_time, default=None)


async def previous_turns(store: GraphStore, episodes: Sequence[Episode]) -> list[Episode | None]:
    """For each episode that says "she" or "he" and is the first of its conversation in the batch, the stored turn
    before it; None for the others (a later turn of the batch follows the one before it in the batch)."""
    out: list[Episode | None] = [None] * len(episodes)
    seen: set[tuple[str, str | None]] = set()
    newest: dict[str, list[Episode]] = {}
    for i, episode in enumerate(episodes):
        conversation = (episode.group_id, episode.channel_id)
        first = conversation not in seen
        seen.add(conversation)
        if not first or not wants_previous(episode):
            continue
        if episode.group_id not in newest:
            newest[episode.group_id] = await store.episodes(episode.group_id, LOOK_BACK)
        out[i] = before(episode, newest[episode.group_id])
    return out
