"""The turns this process extracted and may not have stored yet, and the order its batches are extracted in.

Why: the worker works on two batches at once (the next is extracted while the store commits the last). A turn's
look back for whom "she" means (previous_turn.py) reads the turns before it from the store; while those turns are
in the batch still being committed, the store does not have them, "she" names nobody and the fact is lost. That is
the live case: "My cousin Marta lives in Porto" and "She works as a pharmacist" come as two messages a second apart,
two batches in flight. So batches whose extractor looks back are extracted in the order they came (a ticket each),
and each batch's turns stay in hand, a few per group, for the next batch's look back, stored or not.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence

import anyio

from mnemobus.engine.previous_turn import LOOK_BACK
from mnemobus.store.model import Episode

#: groups whose latest turns are kept (the oldest group forgotten first; a forgotten group's turns are in the store)
GROUPS_KEPT = 10_000


class TurnsInHand:
    def __init__(self) -> None:
        self._turns: OrderedDict[str, deque[Episode]] = OrderedDict()
        self._issued = 0
        self._released = 0  # every ticket below this has finished extracting
        self._finished: set[int] = set()
        self._events: dict[int, anyio.Event] = {}

    def ticket(self) -> int:
        """A batch's place in the extraction order: taken when it arrives, before anything is awaited."""
        n = self._issued
        self._issued += 1
        self._events[n] = anyio.Event()
        return n

    async def turn_of(self, ticket: int) -> None:
        """Until every batch that came before has been extracted (or given up)."""
        if self._released < ticket:
            await self._events[ticket - 1].wait()

    def done(self, ticket: int) -> None:
        """The batch is extracted (or failed, or was cut short): the next may go once all before it are done too.
        Idempotent."""
        if ticket < self._released:
            return
        self._finished.add(ticket)
        while self._released in self._finished:
            self._finished.discard(self._released)
            self._events.pop(self._released).set()
            self._released += 1

    def keep(self, episodes: Sequence[Episode]) -> None:
        for episode in episodes:
            kept = self._turns.get(episode.group_id)
            if kept is None:
                kept = self._turns[episode.group_id] = deque(maxlen=2 * LOOK_BACK)
            kept.append(episode)
            self._turns.move_to_end(episode.group_id)
        while len(self._turns) > GROUPS_KEPT:
            self._turns.popitem(last=False)

    def of_group(self, group_id: str) -> list[Episode]:
        """The group's latest turns this process extracted, stored or not."""
        return list(self._turns.get(group_id, ()))
