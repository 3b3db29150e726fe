"""The graph domain: how large the groups have grown and whether community refreshes keep up (issue 39).

`largestGroupEntities` is what a cap goal compares; `refreshOverdueGroups` counts the groups that stored a
whole refresh interval of episodes (communities.refresh_every_episodes) after their last refresh: one that
stays above zero means the worker's refreshes stopped. At most MAX_GROUPS groups are read per poll, in turn,
so a store of many groups costs each poll the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mnemobus.store.communities import CommunityStore
from worldstate.probes import NO_ENGINE, Domain, ProbeContext

MAX_GROUPS = 200


@dataclass
class GraphUpkeepProbe:
    ctx: ProbeContext
    name: str = "graph_upkeep"
    _offset: int = field(default=0)
    _largest: dict[str, int] = field(default_factory=dict)  # entities per group, as last read

    async def observe(self) -> dict[str, Any]:
        engine = self.ctx.engine
        if engine is None:
            raise RuntimeError(NO_ENGINE)
        store = engine.store
        if not isinstance(store, CommunityStore):
            return {"communitiesKept": False}
        groups = sorted(await store.group_ids())
        if self._offset >= len(groups):
            self._offset = 0
        batch = groups[self._offset:self._offset + MAX_GROUPS]
        self._offset += len(batch)
        every = self.ctx.settings.communities.refresh_every_episodes
        overdue = 0
        for group in batch:
            stats = await store.graph_stats(group)
            self._largest[group] = stats.entities
            if every and await self._overdue(store, group, every, stats.last_refresh):
                overdue += 1
        self._largest = {g: n for g, n in self._largest.items() if g in set(groups)}
        biggest = max(self._largest.items(), key=lambda kv: (kv[1], kv[0]), default=("", 0))
        return {"communitiesKept": True, "groupsChecked": len(batch), "refreshOverdueGroups": overdue,
                "largestGroupEntities": biggest[1], "largestGroup": biggest[0]}

    @staticmethod
    async def _overdue(store: Any, group: str, every: int, last_refresh: Any) -> bool:
        recent = await store.episodes(group, last_n=every)
        if len(recent) < every:
            return False
        oldest = min(ep.created_at or ep.reference_time for ep in recent)
        return last_refresh is None or oldest > last_refresh


def graph_domain(ctx: ProbeContext) -> Domain:
    return Domain("graph", (GraphUpkeepProbe(ctx),))
