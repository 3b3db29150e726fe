"""Recall: query text + groups + as-of time -> ranked facts and source messages with provenance.

One function serves the plugin, the API and the probes. Per group it gathers
candidates from full-text, vector and a graph walk from matched entities,
fuses them by reciprocal rank, weights them by decayed confidence, recency
and retrieval count, and keeps only facts valid at the asked time. Groups
are searched separately and merged afterwards, so nothing crosses groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import anyio
import anyio.to_thread
import numpy as np

from mnemobus.engine.embed import Embedder
from mnemobus.engine.recipes import Recipe, recipe_named
from mnemobus.engine.scoring import decayed_confidence, fact_weight, rrf
from mnemobus.engine.text import query_terms
from mnemobus.errors import InvalidMessage
from mnemobus.groups import GroupId, InvalidGroupId, validate_group_id
from mnemobus.store.contract import BatchReads, GraphStore, Hit
from mnemobus.store.model import RecallQuery, RecallResult, ScoredEpisode, ScoredFact

MAX_QUERY_CHARS = 4000
MAX_GROUPS = 64


def checked_groups(group_ids: Sequence[str]) -> tuple[GroupId, ...]:
    """Every id checked before any store sees it; duplicates dropped, order kept."""
    if len(group_ids) > MAX_GROUPS:
        raise InvalidMessage("too_many_groups", f"{len(group_ids)} groups in one recall; the limit is {MAX_GROUPS}")
    try:
        return tuple(dict.fromkeys(validate_group_id(g) for g in group_ids))
    except InvalidGroupId as exc:
        raise InvalidMessage("invalid_group_id", str(exc)) from exc


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [h.id for h in hits]


async def _group_facts(
    store: GraphStore, group: GroupId, terms: list[str], vector: np.ndarray | None, as_of: datetime, recipe: Recipe
) -> dict[str, float]:
    rankings: list[list[str]] = []
    weights: list[float] = []
    n = recipe.candidates
    if "text" in recipe.fact_methods and terms:
        rankings.append(_ids(await store.search_facts_text(group, terms, as_of, n)))
        weights.append(recipe.text_weight)
    if "vector" in recipe.fact_methods and vector is not None:
        hits = await store.search_facts_vector(group, vector, as_of, n)
        rankings.append([h.id for h in hits if h.score >= recipe.min_fact_similarity])
        weights.append(recipe.vector_weight)
    if "graph" in recipe.fact_methods:
        seeds: list[list[str]] = []
        if terms:
            seeds.append(_ids(await store.search_entities_text(group, terms, recipe.seed_entities)))
        if vector is not None:
            seeds.append(_ids(await store.search_entities_vector(group, vector, recipe.seed_entities)))
        fused_seeds = rrf(seeds, recipe.rrf_k)
        seed_ids = sorted(fused_seeds, key=lambda i: -fused_seeds[i])[: recipe.seed_entities]
        if seed_ids:
            walked = await store.neighbourhood(group, seed_ids, as_of=as_of, max_hops=recipe.max_hops, limit=n)
            # within a hop, facts the query itself ranked high come first: the walk's order follows the query
            direct = rrf(rankings, recipe.rrf_k, weights)
            rankings.append([fh.fact.id for fh in sorted(
                walked, key=lambda fh: (fh.hop, -direct.get(fh.fact.id, 0.0), -fh.fact.confidence))])
            weights.append(recipe.graph_weight)
    return rrf(rankings, recipe.rrf_k, weights)


async def _group_episodes(
    store: GraphStore, group: GroupId, terms: list[str], vector: np.ndarray | None, recipe: Recipe, limit: int
) -> dict[str, float]:
    rankings: list[list[str]] = []
    weights: list[float] = []
    n = max(limit * 3, 10)
    if "text" in recipe.episode_methods and terms:
        rankings.append(_ids(await store.search_episodes_text(group, terms, n)))
        weights.append(recipe.text_weight)
    if "vector" in recipe.episode_methods and vector is not None:
        hits = await store.search_episodes_vector(group, vector, n)
        rankings.append([h.id for h in hits if h.score >= recipe.min_episode_similarity])
        weights.append(recipe.vector_weight)
    return rrf(rankings, recipe.rrf_k, weights)


def _dedupe(items: list, key, group_rank, score, ident, limit: int) -> list:  # type: ignore[no-untyped-def,type-arg]
    """Best score per key, represented by the copy from the first-named group; ranked by that best score."""
    best: dict[str, tuple[float, object]] = {}
    for item in items:
        k = key(item)
        if k not in best:
            best[k] = (score(item), item)
            continue
        top, kept = best[k]
        chosen = item if group_rank(item) < group_rank(kept) else kept
        best[k] = (max(top, score(item)), chosen)
    ranked = sorted(best.values(), key=lambda pair: (-pair[0], ident(pair[1])))
    return [replace(item, score=top) for top, item in ranked[:limit]]  # type: ignore[type-var]


async def recall(store: GraphStore, embedder: Embedder | None, query: RecallQuery) -> RecallResult:
    recipe = recipe_named(query.recipe)
    groups = checked_groups(query.group_ids)
    if len(query.text) > MAX_QUERY_CHARS:
        raise InvalidMessage("query_too_long", f"{len(query.text)} characters; the limit is {MAX_QUERY_CHARS}")
    as_of = query.as_of or datetime.now(UTC)
    if as_of.tzinfo is None:
        as_of = as_of.replace(tzinfo=UTC)
    terms = query_terms(query.text)
    wants_vector = embedder is not None and query.text.strip() and (
        "vector" in recipe.fact_methods or "vector" in recipe.episode_methods or "graph" in recipe.fact_methods
    )
    vector = (await anyio.to_thread.run_sync(embedder.embed, [query.text]))[0] if wants_vector else None  # type: ignore[union-attr]
    if not groups or (not terms and vector is None):
        return RecallResult(groups=groups)

    scored_facts: list[ScoredFact] = []
    scored_episodes: list[ScoredEpisode] = []

    async def one(store: GraphStore, group: GroupId) -> None:
        if query.max_facts > 0:
            fused = await _group_facts(store, group, terms, vector, as_of, recipe)
            best = sorted(fused, key=lambda i: -fused[i])[: recipe.candidates]
            for fact in await store.get_facts(group, best):
                if decayed_confidence(fact, as_of, recipe.decay_rate) < recipe.min_confidence:
                    continue
                weight = fact_weight(fact, as_of, decay_rate=recipe.decay_rate, recency_rate=recipe.recency_rate,
                                     retrieval_boost=recipe.retrieval_boost)
                scored_facts.append(ScoredFact(fact, fused[fact.id] * weight))
        if query.max_episodes > 0:
            fused_ep = await _group_episodes(store, group, terms, vector, recipe, query.max_episodes)
            best_ep = sorted(fused_ep, key=lambda i: -fused_ep[i])[: query.max_episodes * 2]
            for episode in await store.get_episodes(group, best_ep):
                if episode.reference_time is not None and episode.reference_time > as_of:
                    continue
                scored_episodes.append(ScoredEpisode(episode, fused_ep[episode.id]))

    async def searched(group: GroupId) -> None:
        if isinstance(store, BatchReads):  # one thread hop for the group's ten-odd reads
            await store.run_reads(lambda view: one(view, group))
        else:
            await one(store, group)

    if len(groups) == 1:
        await searched(groups[0])
    else:
        async with anyio.create_task_group() as tg:
            for group in groups:
                tg.start_soon(searched, group)

    # the same fact or message in several groups is shown once, with its best score, under the group the
    # caller named first (the shared user group before a per-agent one)
    order = {g: i for i, g in enumerate(groups)}
    facts = _dedupe(scored_facts, lambda sf: sf.fact.fact.casefold(), lambda sf: order[sf.fact.group_id],
                    lambda sf: sf.score, lambda sf: sf.fact.id, query.max_facts)
    episodes = tuple(_dedupe(scored_episodes, lambda se: se.episode.content.casefold(),
                             lambda se: order[se.episode.group_id], lambda se: se.score, lambda se: se.episode.id,
                             query.max_episodes))
    by_group: dict[GroupId, list[str]] = {}
    for sf in facts:
        by_group.setdefault(sf.fact.group_id, []).append(sf.fact.id)
    for group, ids in by_group.items():
        await store.mark_retrieved(group, ids)
    return RecallResult(facts=tuple(facts), episodes=episodes, groups=groups)
