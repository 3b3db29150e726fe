"""`memory.api.graph.stats` and `memory.api.graph.refresh`: how big each group's graph is and how its upkeep
is going, and a community refresh on demand (`mnemobus graph stats|refresh` ask these).

A refresh asked here runs on the worker's refresher when the worker is in this process (one resumable state
per group), else on one the API keeps; the bound, the off-loop thread and the no-work-when-unchanged rule
are the same as the worker's (mnemobus/engine/communities.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from mnemobus.api.core import MemoryService
from mnemobus.api.models import Body, GroupIdField
from mnemobus.kernel.community_upkeep import make_refresher
from mnemobus.engine.communities import CommunityRefresher, RefreshOutcome
from mnemobus.shared.errors import InvalidMessage
from mnemobus.shared.groups import GroupId
from mnemobus.store.communities import CommunityStore, GraphStats


class GraphRequest(Body):
    group_id: GroupIdField | None = None  # None: every group the store holds


class GraphStatsResult(BaseModel):
    groups: list[GraphStats]


class GraphRefreshResult(BaseModel):
    refreshes: list[RefreshOutcome]


def _communities(svc: MemoryService) -> CommunityStore:
    if not isinstance(svc.store, CommunityStore):
        raise InvalidMessage("unsupported", f"the {svc.store.name} store keeps no communities")
    return svc.store


async def _groups(svc: MemoryService, group_id: str | None) -> list[GroupId]:
    return [GroupId(group_id)] if group_id else await svc.all_groups()


def refresher_of(svc: MemoryService) -> CommunityRefresher:
    rt = svc.rt
    worker = getattr(rt, "worker", None)
    if worker is not None and worker.communities.refresher is not None:
        return worker.communities.refresher
    found = rt.extra.get("community_refresher")
    if found is None:
        s = rt.settings
        found = make_refresher(rt.engine, s.communities, s.extraction, rt.metrics.llm, rt.metrics.communities)
        rt.extra["community_refresher"] = found
    if found is None:
        raise InvalidMessage("unsupported", f"the {svc.store.name} store keeps no communities")
    return found


async def graph_stats(svc: MemoryService, group_id: str | None) -> GraphStatsResult:
    store = _communities(svc)
    return GraphStatsResult(groups=[await store.graph_stats(g) for g in await _groups(svc, group_id)])


async def graph_refresh(svc: MemoryService, group_id: str | None) -> GraphRefreshResult:
    refresher = refresher_of(svc)
    return GraphRefreshResult(refreshes=[await refresher.refresh(g) for g in await _groups(svc, group_id)])


def upkeep_operations(svc: MemoryService) -> dict[str, tuple[type[BaseModel], Any]]:
    """The endpoints this module adds to `memory.api.*` (nats_service.operations)."""

    async def stats(q: GraphRequest) -> BaseModel:
        return await graph_stats(svc, q.group_id)

    async def refresh(q: GraphRequest) -> BaseModel:
        return await graph_refresh(svc, q.group_id)

    return {"graph.stats": (GraphRequest, stats), "graph.refresh": (GraphRequest, refresh)}
