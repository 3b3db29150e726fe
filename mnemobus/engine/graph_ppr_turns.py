"""Graph recall's `ppr_turns` mode: HippoRAG's personalized PageRank over the bipartite graph of turns and the
entities they mention, scoring turns by the mass the walk leaves on them.

Why a mode of its own: `ppr` (graph_recall.pagerank) walks entities, turns and facts as three kinds of node,
restarts at the seeds by their fused score, and a fact is a node the walk must cross. HippoRAG's form differs in
the three places that decide which turns win: a fact is an edge between its two entities (weighted by its
confidence), so the walk goes entity → entity in one step; the restart weighs each seed by its specificity (one
over the number of turns that mention it: a speaker named in every turn restarts the walk with almost nothing,
a pet named in three restarts it with much); and a turn's score is its own PageRank mass, so a turn mentioning
two reached entities gathers from both. The graph is the one `local_graph` read (at most two store reads):
the seeds' turns and facts, then those of the entities one fact away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from mnemobus.engine.recipes import Recipe
from mnemobus.store.contract import EntityLinks

MAX_ITERATIONS = 50
TOLERANCE = 1e-6  # L1 change per step below which the ranks no longer reorder a few hundred nodes


def specificity(seeds: Mapping[str, float], near: EntityLinks) -> dict[str, float]:
    """Each seed's restart weight: its fused score over the number of turns that mention it (HippoRAG's node
    specificity, 1/|P_i|), an entity no turn mentions counted as mentioned once."""
    return {e: u / max(near.mention_degree.get(e, 0), 1) for e, u in seeds.items()}


def turns_pagerank(seeds: Mapping[str, float], reads: Sequence[EntityLinks], recipe: Recipe,
                   ) -> tuple[list[str], list[str]]:
    """Personalized PageRank from the seeds (entity id -> fused score; `reads[0]` holds their own links, the
    others those of entities further out), restarting with probability `graph_ppr_alpha`, over turns and entities:
    a mention is an edge of weight 1 between a turn and an entity, a fact an edge of its confidence between its
    two entities. An entity's walk is shared out by its full count of links (the store's, not only those read),
    so the share bound for links not read is lost rather than piled on the ones read: a hub stays thin. Turns
    rank by their mass; facts by the mass of their two ends times their confidence. Returns (turns, facts), best
    first."""
    nodes: dict[str, int] = {}
    src: list[int] = []
    dst: list[int] = []
    weight: list[float] = []
    full: dict[str, float] = {}
    mentions: set[tuple[str, str]] = set()
    facts: dict[str, tuple[str, str, float]] = {}
    for links in reads:
        mentions.update(links.mentions)
        for fid, e, other, confidence in links.facts:
            facts.setdefault(fid, (e, other, confidence))
        for e in links.mention_degree.keys() | links.fact_degree.keys():
            full["e:" + e] = float(links.mention_degree.get(e, 0) + links.fact_degree.get(e, 0))
    edges = [("e:" + e, "t:" + ep, 1.0) for e, ep in sorted(mentions)]
    edges += [("e:" + e, "e:" + other, c) for e, other, c in facts.values() if e != other]
    for a, b, w in edges:
        i, j = nodes.setdefault(a, len(nodes)), nodes.setdefault(b, len(nodes))
        src += [i, j]
        dst += [j, i]
        weight += [w, w]
    restart = np.zeros(len(nodes))
    for e, r in specificity(seeds, reads[0] if reads else EntityLinks()).items():
        if "e:" + e in nodes:
            restart[nodes["e:" + e]] = r
    if not nodes or restart.sum() <= 0:
        return [], []
    restart /= restart.sum()
    s, d, w = np.asarray(src), np.asarray(dst), np.asarray(weight)
    local = np.bincount(s, weights=w, minlength=len(nodes))
    counted = np.array([full.get(name, 0.0) for name in nodes])
    share = w / np.maximum(local, counted)[s]
    alpha = recipe.graph_ppr_alpha
    rank = restart.copy()
    for _ in range(MAX_ITERATIONS):
        moved = np.bincount(d, weights=rank[s] * share, minlength=len(nodes))
        step = alpha * restart + (1 - alpha) * moved
        done = np.abs(step - rank).sum() < TOLERANCE
        rank = step
        if done:
            break
    names = list(nodes)
    order = np.argsort(-rank, kind="stable")
    turns = [names[i][2:] for i in order if names[i].startswith("t:") and rank[i] > 0]
    mass = {names[i][2:]: float(rank[i]) for i in range(len(names)) if names[i].startswith("e:")}
    fact_score = {fid: (mass.get(e, 0.0) + mass.get(o, 0.0)) * c for fid, (e, o, c) in facts.items()}
    ranked = sorted((f for f in fact_score if fact_score[f] > 0), key=lambda f: (-fact_score[f], f))
    cap = recipe.graph_node_cap
    return turns[:cap], ranked[:cap]
