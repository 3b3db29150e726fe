"""Community summaries as one more recall signal (`memory.recall.communities: on`).

Seed 004 (Zeph) matches a query against community summaries: a question about a theme ("what does she do for
her kids?") can match the summary of the community that holds it when no single fact's words do. Here the
summaries whose vectors are nearest the query's name their communities; the facts of those communities' members
(the query's own matched entities first) become one ranking in the fusion, ordered by the query's direct
ranking of them, then by confidence. Off by default: bench_community_recall.py says what it gave on LoCoMo.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from mnemobus.engine.recipes import Recipe
from mnemobus.shared.groups import GroupId
from mnemobus.store.communities import CommunityStore
from mnemobus.store.contract import Hit, StoreReads


def matched(hits: Sequence[Hit], recipe: Recipe) -> list[str]:
    """The communities whose summary is near enough the query, best first."""
    return [h.id for h in hits if h.score >= recipe.min_community_similarity][: recipe.community_matches]


async def community_ranking(store: StoreReads, group: GroupId, community_ids: Sequence[str], seeds: Sequence[str],
                            as_of: datetime, recipe: Recipe, direct: Mapping[str, float]) -> list[str]:
    """Fact ids of the matched communities' members, best-matched community first: the walk's one-hop facts from
    at most `community_members` members, ordered by the query's own fused score, then confidence."""
    if not community_ids or not isinstance(store, CommunityStore):
        return []
    members = await store.community_members(group, community_ids)
    start: list[str] = []
    for cid in community_ids:
        inside = members.get(cid, ())
        start += [s for s in seeds if s in inside] + list(inside)
    start = list(dict.fromkeys(start))[: recipe.community_members]
    if not start:
        return []
    steps = await store.walk(group, start, as_of=as_of, max_hops=1, limit=recipe.candidates)
    return [s.fact_id for s in sorted(steps, key=lambda s: (-direct.get(s.fact_id, 0.0), -s.confidence, s.fact_id))]
