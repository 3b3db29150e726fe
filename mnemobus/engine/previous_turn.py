"""The turns said just before an episode in its conversation, for an extractor that resolves "she" and "he" to the
person those turns named.

Why: a conversation names someone once ("my sister Ana lives in York") and goes on with pronouns ("She moved to
Leeds"), often after a turn about something else. The offline extractor reaches back PRONOUN_REACH turns for the
person last named. Turns of one batch are in hand; the turns before a batch (every message POST /messages or the
plugin sends on its own is a batch of one) are in the store: one read of the group's newest episodes, only when a
turn within reach of the batch's start needs it. The reach is the same both ways, so what a conversation leaves in
the graph does not depend on how the worker's batches fell (before, the batch carried the last person without
bound and a lone turn saw only the turn before it: a 283-turn conversation gave 62 facts in batches of 32, 54 one
turn at a time).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from mnemobus.engine.extract import Extraction
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import Episode

#: the pronouns a previous turn can resolve (a person; "they" and "it" name too many things to guess)
_THIRD_PERSON = re.compile(r"\b(?:she|he|her|him|his|hers)\b", re.IGNORECASE)
#: how many turns back "she" or "he" reaches for the person a turn named: the same reach whether the turns came in
#: one batch or one at a time, so what is extracted does not depend on how the worker's batches fell
PRONOUN_REACH = 4
#: how many of a group's newest episodes are read to find the turns before (other conversations of the group may
#: have spoken since)
LOOK_BACK = 2 * PRONOUN_REACH


@runtime_checkable
class PreviousTurnReader(Protocol):
    """Optional: an extractor that reads each episode after the turns said before it, when there are some."""

    async def extract_after(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]]
                            ) -> list[Extraction | Exception]:
        """One extraction per episode, in order; `previous[i]` holds the stored turns before `episodes[i]`, oldest
        first (empty: none was looked up, the batch itself holds them, or the conversation has none)."""


def wants_previous(episode: Episode) -> bool:
    """Does the episode say "she" or "he" (cheap: most turns do not, and those cost no read)?"""
    return _THIRD_PERSON.search(episode.content) is not None


def before(episode: Episode, candidates: Sequence[Episode], n: int = PRONOUN_REACH) -> list[Episode]:
    """The latest `n` of `candidates` said before `episode` in the same conversation (group and channel), oldest
    first."""
    earlier = [c for c in candidates if c.id != episode.id and c.group_id == episode.group_id
               and c.channel_id == episode.channel_id and c.reference_time <= episode.reference_time]
    return sorted(earlier, key=lambda c: c.reference_time)[-n:]


async def previous_turns(store: GraphStore, episodes: Sequence[Episode],
                         in_hand: Callable[[str], Sequence[Episode]] = lambda group_id: ()) -> list[list[Episode]]:
    """For the first episode of each conversation in the batch, the PRONOUN_REACH turns before it (stored, or
    `in_hand`: extracted by this process and maybe not committed yet), when one of the conversation's first
    PRONOUN_REACH turns in the batch says "she" or "he" (the later ones reach back only into the batch); empty for
    the others."""
    out: list[list[Episode]] = [[] for _ in episodes]
    first: dict[tuple[str, str | None], int] = {}
    wanted: set[int] = set()
    position: dict[tuple[str, str | None], int] = {}
    for i, episode in enumerate(episodes):
        conversation = (episode.group_id, episode.channel_id)
        first.setdefault(conversation, i)
        position[conversation] = position.get(conversation, -1) + 1
        if position[conversation] < PRONOUN_REACH and wants_previous(episode):
            wanted.add(first[conversation])
    newest: dict[str, list[Episode]] = {}
    for i in sorted(wanted):
        episode = episodes[i]
        if episode.group_id not in newest:
            stored = await store.episodes(episode.group_id, LOOK_BACK)
            known = {e.id for e in stored}
            newest[episode.group_id] = [*stored, *(e for e in in_hand(episode.group_id) if e.id not in known)]
        out[i] = before(episode, newest[episode.group_id])
    return out
