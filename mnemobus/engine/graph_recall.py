"""Graph recall: turns and facts reached from the query's entities over the mention and fact graph.

Why: full-text and vectors find a turn only by the words or meaning it shares with the question. A turn that
talks about the person, place or thing the question names, without saying the question's words, is reached
only through the entity both mention (HippoRAG links passages through the entities they mention; SYNAPSE
spreads activation over such a graph). Recall passes the seed entities it already found (full-text and vector
hits on entity names, fused); this module reads their neighbourhood in at most two store reads (the seeds'
links, then the links of the best entities one fact away), scores it in memory by the recipe's `graph` mode,
and returns rankings of episodes and facts that join recall's fusion like any other method.

Modes: `bfs` ranks by hop, then by the seed's rank; `activation` spreads activation (decay per hop, fan-out
normalised by each entity's degree, lateral inhibition among the strongest, a threshold and a node cap);
`ppr` runs personalized PageRank from the seeds over the same local graph; `ppr_turns` is HippoRAG's form of it
(graph_ppr_turns.py).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from mnemobus.engine.graph_ppr_turns import turns_pagerank
from mnemobus.engine.recipes import Recipe
from mnemobus.shared.groups import GroupId
from mnemobus.shared.logthrottle import ThrottledLog
from mnemobus.store.communities import CommunityStore
from mnemobus.store.contract import EntityLinks, GraphStore

MODES = ("off", "bfs", "activation", "ppr", "ppr_turns")
INHIBITORS = 7  # lateral inhibition: how many of the strongest nodes suppress the weaker ones (SYNAPSE's top-M)
PPR_ITERATIONS = 20  # the local graph holds a few hundred nodes: 20 steps move no rank at 1e-3

log = logging.getLogger("mnemobus.engine.graph_recall")
_skip_log = ThrottledLog(log)  # a loaded store skips the hop for request after request: a line per 10 s
#: told (group, how long the first hop took in ms) when the second hop is skipped for its time bound
HopSkipped = Callable[[GroupId, float], None]


@dataclass(frozen=True, slots=True)
class Activated:
    """What graph recall reached, best first."""

    episodes: list[str]
    facts: list[str]


@dataclass(frozen=True, slots=True)
class LocalGraph:
    """The seeds' links (hop 1) and the links of the entities one fact away (hop 2), as read from the store."""

    seeds: dict[str, float]
    near: EntityLinks
    far: EntityLinks
    far_entities: dict[str, float]  # entity one fact from a seed -> the share of activation it received


def _fan(degree: int) -> float:
    """The share a neighbour receives from an entity with this many links: a hub spreads thin."""
    return 1.0 / math.sqrt(max(degree, 1))


def _inhibit(scores: dict[str, float], strength: float) -> dict[str, float]:
    """Lateral inhibition: each of the strongest few lowers every weaker node by a share of the gap."""
    if strength <= 0 or len(scores) < 2:
        return scores
    top = sorted(scores.values(), reverse=True)[:INHIBITORS]
    out = {}
    for node, u in scores.items():
        left = u - strength * sum(k - u for k in top if k > u)
        if left > 0:
            out[node] = left
    return out


def _kept(scores: dict[str, float], threshold: float, cap: int) -> dict[str, float]:
    """The nodes at or above `threshold` times the strongest, at most `cap`, strongest first."""
    if not scores:
        return {}
    floor = threshold * max(scores.values())
    return {n: -neg for neg, n in sorted([(-u, n) for n, u in scores.items() if u >= floor])[:cap]}


async def local_graph(store: GraphStore, group: GroupId, seeds: Mapping[str, float], as_of: datetime,
                      recipe: Recipe, skipped: HopSkipped | None = None) -> LocalGraph:
    """The seeds' links, then (within the time bound and `graph_hops` ≥ 2) those of the best far ends of their
    facts: two reads at most, whatever the graph's size. A second hop skipped for the time bound is logged and
    told to `skipped`: recall then misses what lies one fact away, and an operator must be able to see that."""
    started = time.perf_counter()
    top = max(seeds.values())
    unit = {e: s / top for e, s in seeds.items()}
    near = await store.entity_links(group, list(unit), as_of=as_of, per_entity=recipe.graph_per_entity)
    reach: dict[str, float] = {}
    for _, e, other, confidence in near.facts:
        if other not in unit:
            share = unit[e] * recipe.graph_decay * confidence * _fan(near.fact_degree.get(e, 1))
            reach[other] = reach.get(other, 0.0) + share
    reach = _kept(reach, recipe.graph_threshold, recipe.graph_node_cap)
    took_ms = (time.perf_counter() - started) * 1000
    far = EntityLinks()
    if reach and recipe.graph_hops >= 2:
        if took_ms < recipe.graph_time_budget_ms:
            far = await store.entity_links(group, list(reach), as_of=as_of, per_entity=recipe.graph_per_entity)
        else:
            _skip_log.warning("graph_hop_skipped", "graph recall skipped the second hop for %s: the first took %.1f "
                              "ms, graph_time_budget_ms is %g", group, took_ms, recipe.graph_time_budget_ms)
            if skipped is not None:
                skipped(group, took_ms)
    return LocalGraph(unit, near, far, reach)


def by_hops(graph: LocalGraph, recipe: Recipe) -> Activated:
    """Breadth first: the seeds' turns and facts, then those of the entities one fact away; within a hop, by the
    rank of the entity they hang from, then as the store listed them (newest turn, most confident fact)."""
    order = {e: i for i, e in enumerate(sorted(graph.seeds, key=lambda e: -graph.seeds[e]))}
    far_order = {e: i for i, e in enumerate(graph.far_entities)}
    episodes, facts = [], []
    for links, rank in ((graph.near, order), (graph.far, far_order)):
        episodes += [ep for _, ep in sorted(links.mentions, key=lambda m: rank.get(m[0], len(rank)))]
        facts += [f[0] for f in sorted(links.facts, key=lambda f: rank.get(f[1], len(rank)))]
    cap = recipe.graph_node_cap
    return Activated(list(dict.fromkeys(episodes))[:cap], list(dict.fromkeys(facts))[:cap])


def spread(graph: LocalGraph, recipe: Recipe) -> Activated:
    """Spreading activation: an entity lends each turn that mentions it, and each fact it takes part in, its own
    activation times the decay, shared out by its degree; entities one fact away pass on what they received."""
    episodes: dict[str, float] = {}
    facts: dict[str, float] = {}
    decay = recipe.graph_decay
    for links, source in ((graph.near, graph.seeds), (graph.far, graph.far_entities)):
        # what each entity lends is worked out once per entity, not once per link (~1,000 links a recall at 100k:
        # 0.9 -> 0.3 ms); the same products in the same order, so the same scores to the last bit
        kept = {e: source.get(e, 0.0) * decay for e in links.mention_degree.keys() | links.fact_degree.keys()}
        lent = {e: kept[e] * _fan(n) for e, n in links.mention_degree.items()}
        for e, ep in links.mentions:
            episodes[ep] = episodes.get(ep, 0.0) + (lent[e] if e in lent else source.get(e, 0.0) * decay)
        fan = {e: _fan(n) for e, n in links.fact_degree.items()}
        for fid, e, _, confidence in links.facts:
            share = (kept[e] if e in kept else source.get(e, 0.0) * decay) * confidence * fan.get(e, 1.0)
            facts[fid] = facts.get(fid, 0.0) + share
    cap, threshold = recipe.graph_node_cap, recipe.graph_threshold
    episodes = _kept(_inhibit(episodes, recipe.graph_inhibition), threshold, cap)
    facts = _kept(_inhibit(facts, recipe.graph_inhibition), threshold, cap)
    return Activated(list(episodes), list(facts))


def pagerank(graph: LocalGraph, recipe: Recipe) -> Activated:
    """Personalized PageRank from the seeds over the local graph: entities, turns and facts as nodes, a mention
    or a fact's part as an edge both ways. An entity's walk goes out by its full degree, so the share that
    would leave to links not read is lost rather than piled on the ones read (a hub stays thin)."""
    nodes: dict[str, int] = {}

    def node(key: str) -> int:
        return nodes.setdefault(key, len(nodes))

    src: list[int] = []
    dst: list[int] = []
    seen: set[tuple[str, str]] = set()
    degree: dict[str, int] = {}
    for links in (graph.near, graph.far):
        for e in links.mention_degree.keys() | links.fact_degree.keys():
            degree["e:" + e] = links.mention_degree.get(e, 0) + links.fact_degree.get(e, 0)
        pairs = [(e, "ep:" + ep) for e, ep in links.mentions]
        pairs += [(end, "f:" + fid) for fid, e, other, _ in links.facts for end in (e, other)]
        for e, item in pairs:
            if (e, item) in seen:
                continue
            seen.add((e, item))
            a, b = node("e:" + e), node(item)
            src += [a, b]
            dst += [b, a]
    if not nodes:
        return Activated([], [])
    s, d = np.asarray(src), np.asarray(dst)
    counted = np.bincount(s, minlength=len(nodes)).astype(np.float64)
    fan = np.maximum(counted, [degree.get(name, 0) for name in nodes])
    weight = 1.0 / fan[s]
    restart = np.zeros(len(nodes))
    for e, u in graph.seeds.items():
        if "e:" + e in nodes:
            restart[nodes["e:" + e]] = u
    if restart.sum() == 0:
        return Activated([], [])
    restart /= restart.sum()
    rank = restart.copy()
    alpha = recipe.graph_ppr_alpha
    for _ in range(PPR_ITERATIONS):
        moved = np.zeros(len(nodes))
        np.add.at(moved, d, rank[s] * weight)
        rank = alpha * restart + (1 - alpha) * moved
    names = list(nodes)
    order = np.argsort(-rank, kind="stable")
    episodes = [names[i][3:] for i in order if names[i].startswith("ep:") and rank[i] > 0]
    facts = [names[i][2:] for i in order if names[i].startswith("f:") and rank[i] > 0]
    return Activated(episodes[: recipe.graph_node_cap], facts[: recipe.graph_node_cap])


async def chosen_seeds(store: GraphStore, group: GroupId, candidates: Mapping[str, float],
                       recipe: Recipe) -> dict[str, float]:
    """The `seed_entities` strongest candidates, at most `graph_seeds_per_community` of one community when that
    cap is set and the store keeps communities (an entity in none counts alone)."""
    ranked = sorted(candidates, key=lambda e: -candidates[e])
    cap = recipe.graph_seeds_per_community
    if cap <= 0 or not isinstance(store, CommunityStore):
        return {e: candidates[e] for e in ranked[: recipe.seed_entities]}
    community = await store.community_of(group, ranked)
    taken: Counter[str] = Counter()
    kept: dict[str, float] = {}
    for e in ranked:
        c = community.get(e, "entity:" + e)
        if taken[c] < cap and len(kept) < recipe.seed_entities:
            taken[c] += 1
            kept[e] = candidates[e]
    return kept


async def graph_rankings(store: GraphStore, group: GroupId, candidates: Mapping[str, float], as_of: datetime,
                         recipe: Recipe, skipped: HopSkipped | None = None) -> Activated:
    """The recipe's graph mode from the query's entities (entity id -> fused score); nothing when off."""
    if recipe.graph == "off" or not candidates:
        return Activated([], [])
    seeds = await chosen_seeds(store, group, candidates, recipe)
    graph = await local_graph(store, group, seeds, as_of, recipe, skipped)
    if recipe.graph == "bfs":
        return by_hops(graph, recipe)
    if recipe.graph == "ppr":
        return pagerank(graph, recipe)
    if recipe.graph == "ppr_turns":
        return Activated(*turns_pagerank(graph.seeds, (graph.near, graph.far), recipe))
    return spread(graph, recipe)

