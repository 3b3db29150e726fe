"""What a store keeps of a group's communities, and the optional contract a backend implements to keep it.

The algorithm (label propagation, fingerprints, votes, summaries) lives in `mnemobus.engine.communities`;
a backend only reads active edges in chunks and writes what the engine decided, so both backends hold the
same communities for the same graph. Graphiti's community update ran in one unbounded pass over the whole
graph (and hung on real graphs); reading in chunks is what lets ours stop at a time bound and resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Hit
from mnemobus.store.model import Vector


@dataclass(frozen=True, slots=True)
class Edge:
    """One active fact as the community algorithm sees it: an undirected link between two entities."""

    fact_id: str
    subject_id: str
    object_id: str


def node_key(canonical_name: str | None, type_: str | None) -> str:
    """An entity's place in label propagation's node order (`CommunityStore.node_keys`): the same in every group
    for the same named entity. Ids are digests that include the group, so ordering by them gave one graph 3
    communities under one group name and 2 under another."""
    return f"{canonical_name or ''}\x1f{type_ or ''}"


@dataclass(frozen=True, slots=True)
class Community:
    """One community of a group: its members (sorted ids), fingerprint, summary and the summary's vector."""

    id: str
    group_id: GroupId
    members: tuple[str, ...]
    fingerprint: str
    summary: str
    embedding: Vector | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class GraphStats:
    """How big a group's graph is and how its upkeep is going (`mnemobus graph stats`)."""

    group_id: GroupId
    entities: int
    active_facts: int
    ended_facts: int
    communities: int
    largest_community: int
    last_refresh: datetime | None
    evicted: int  # rows removed by eviction so far (a counter the eviction work raises; 0 until it runs)


@runtime_checkable
class CommunityStore(Protocol):
    """Optional part of a GraphStore: where a group's communities are kept. Both built-in backends have it.

    A fact is *active* when it has neither ended (invalid_at) nor expired (expired_at); only active facts
    link entities into communities."""

    async def active_edges(self, group_id: GroupId, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]:
        """Up to `limit` active facts of the group after `cursor` (None: from the start), and the cursor to
        read on from (None when no more). Chunks let a refresh read a large group without holding it in one
        query, and stop between chunks."""

    async def node_keys(self, group_id: GroupId, cursor: str | None, limit: int) -> tuple[dict[str, str], str | None]:
        """Up to `limit` of the group's entities after `cursor`, each id with its `node_key`, and the cursor to
        read on from (None when no more): read once per refresh, one row per entity rather than two names per
        fact."""

    async def communities(self, group_id: GroupId) -> list[Community]:
        """The group's stored communities, by id; members of deleted entities left out."""

    async def write_communities(self, group_id: GroupId, put: Sequence[Community], drop: Sequence[str],
                                refreshed_at: datetime) -> None:
        """Store each of `put` (members replaced), remove the communities `drop` names, and record the refresh
        time, in one transaction (a refresh writes its communities in several calls). An entity belongs to at most one community: putting it in one takes it out
        of any other."""

    async def join_community(self, group_id: GroupId, community_id: str, entity_id: str) -> bool:
        """Add one entity to a stored community (between full refreshes); False when the community is gone."""

    async def community_of(self, group_id: GroupId, entity_ids: Sequence[str]) -> dict[str, str]:
        """The community of each named entity that has one."""

    async def has_communities(self, group_id: GroupId) -> bool:
        """Whether the group holds any community: until its first refresh there is nothing to join, and a vote
        is skipped whole rather than walking each new entity's neighbours to learn so."""

    async def search_communities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        """The communities whose summary vectors are nearest, best first (cosine)."""

    async def community_members(self, group_id: GroupId, community_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """The members (sorted ids) of each named community of the group that exists: what recall walks from
        when a community's summary matched the query."""

    async def graph_stats(self, group_id: GroupId) -> GraphStats: ...


def nearest_communities(rows: Sequence[tuple[str, Vector | None]], vector: Vector, limit: int) -> list[Hit]:
    """Cosine over a group's community vectors, best first (ties by id): a group has few communities, so a scan
    is cheaper than any index."""
    kept = [(cid, v) for cid, v in rows if v is not None]
    if not kept or limit <= 0:
        return []
    scores = np.stack([np.asarray(v, np.float32) for _, v in kept]) @ np.asarray(vector, np.float32)
    order = sorted(range(len(kept)), key=lambda i: (-float(scores[i]), kept[i][0]))[:limit]
    return [Hit(kept[i][0], float(scores[i])) for i in order]
