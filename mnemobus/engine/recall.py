"""Recall: query text + groups + as-of time -> ranked facts and source messages with provenance.

One function serves the plugin, the API and the probes. Per group it gathers
candidates from full-text, vector and a graph walk from matched entities,
fuses them by reciprocal rank, weights them by confidence and an age prior
that ranks but never erases (scoring.py), and keeps only facts valid at the asked time. Groups
are searched separately and merged afterwards, so nothing crosses groups.
Every backend runs the same steps: it decides how (`GraphStore.run_reads`,
`gather`), never recall; whole facts (names, provenance) are read only for
the few returned, after the merge.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from mnemobus.engine.embed import Embedder
from mnemobus.engine.community_recall import community_ranking, matched
from mnemobus.engine.graph_recall import Activated, HopSkipped, graph_rankings
from mnemobus.engine.graph_slots import SLOTS_WITHIN, with_graph_slots
from mnemobus.engine.promoted import promoted_for
from mnemobus.engine.recipes import RECIPES, Recipe, recipe_named
from mnemobus.engine.scoring import fact_weight, forgotten, rrf
from mnemobus.engine.text import query_terms
from mnemobus.shared.errors import InvalidMessage
from mnemobus.shared.groups import GroupId, InvalidGroupId, validate_group_id
from mnemobus.shared.limits import MAX_QUERY_CHARS
from mnemobus.store.communities import CommunityStore
from mnemobus.store.contract import GraphStore, Hit, Standing, StoreReads
from mnemobus.store.lifecycle import Promoted
from mnemobus.store.model import (Episode, Fact, Neighbour, RecallQuery, RecallResult, Said, ScoredEpisode,
                                  ScoredFact, one_ranking)

MAX_GROUPS = 64
MIN_CANDIDATES = 10  # fact candidates a method asks for however few facts are asked: the fusion needs depth


def shortlisted(max_episodes: int) -> int:
    """Messages a group reads (light) for an answer of max_episodes: half again as many, for the turns around them
    and the other groups to reorder. Twice as many changed no recall@10 on the blind set or LoCoMo dev (issue 36)."""
    return max_episodes + max_episodes // 2


def anchored(max_episodes: int) -> int:
    """Messages a group reads the turns around: the first half of an answer's worth. A neighbour is lent its
    anchor's score times 0.6-0.7, so a lower anchor's neighbour is almost never shown; with all of them the blind
    set and LoCoMo dev gave the same recall@10, at 10 and at 20 items (docs/performance.md, issue 36)."""
    return (max_episodes + 1) // 2


def checked_groups(group_ids: Sequence[str]) -> tuple[GroupId, ...]:
    """Every id checked before any store sees it; duplicates dropped, order kept."""
    if len(group_ids) > MAX_GROUPS:
        raise InvalidMessage("too_many_groups", f"{len(group_ids)} groups in one recall; the limit is {MAX_GROUPS}")
    try:
        return tuple(dict.fromkeys(validate_group_id(g) for g in group_ids))
    except InvalidGroupId as exc:
        raise InvalidMessage("invalid_group_id", str(exc)) from exc


@dataclass(frozen=True, slots=True)
class WeighedFact:
    """A weighed fact of one group: a Standing until recall reads the whole row of the few it returns."""

    group_id: GroupId
    row: Fact | Standing
    score: float


@dataclass(frozen=True, slots=True)
class WeighedEpisode:
    """A scored message: a Said until recall reads the whole row of the few it returns (issue 36)."""

    row: Episode | Said
    score: float


def said_at(row: Episode | Said) -> float:
    """When the message was said, epoch seconds."""
    return row.at_s if isinstance(row, Said) else row.reference_time.timestamp()


async def _whole(light: Sequence[tuple[GroupId, str]],
                 read: Callable[[GroupId, list[str]], Awaitable[Sequence[Any]]]) -> dict[tuple[GroupId, str], Any]:
    """The whole rows of (group, id) pairs, one read per group."""
    wanted: dict[GroupId, list[str]] = {}
    for group, row_id in light:
        wanted.setdefault(group, []).append(row_id)
    return {(g, row.id): row for g, ids in wanted.items() for row in await read(g, ids)}


async def whole_episodes(store: StoreReads, found: list[WeighedEpisode]) -> list[ScoredEpisode]:
    """The chosen messages as whole rows, in the order given: built from what their read fetched where the store
    kept it (`Said.whole`), else read by id; one deleted since it was weighed is left out."""
    read = await _whole([(e.row.group_id, e.row.id) for e in found if isinstance(e.row, Said) and e.row.whole is None],
                        store.get_episodes)
    out = []
    for e in found:
        row = e.row
        episode = row if isinstance(row, Episode) else row.whole() if row.whole else read.get((row.group_id, row.id))
        if episode is not None:
            out.append(ScoredEpisode(episode, e.score))
    return out


async def whole_facts(store: StoreReads, found: list[WeighedFact]) -> list[ScoredFact]:
    """The chosen facts as whole rows, in the order given; a fact deleted since it was weighed is left out."""
    read = await _whole([(f.group_id, f.row.id) for f in found if not isinstance(f.row, Fact)], store.get_facts)
    out = []
    for f in found:
        fact = f.row if isinstance(f.row, Fact) else read.get((f.group_id, f.row.id))
        if fact is not None:
            out.append(ScoredFact(fact, f.score))
    return out


async def _search_group(store: StoreReads, group: GroupId, terms: list[str], vector: np.ndarray | None,
                        as_of: datetime, recipe: Recipe, query: RecallQuery, hop_skipped: HopSkipped | None = None,
                        ) -> tuple[list[WeighedFact], list[WeighedEpisode]]:
    """One group in three rounds: every candidate query, then the graph walk from the matched entities, then the rows.

    Rounds, not one call per method, because on a networked store each
    round is one round trip however many queries it holds.
    """
    # no more fact candidates a method than the answer can use: the fused top-k (docs/performance.md, issue 36)
    n, n_ep = min(recipe.candidates, max(query.max_facts, MIN_CANDIDATES)), max(query.max_episodes * 3, 10)
    fm = recipe.fact_methods if query.max_facts > 0 else ()
    em = recipe.episode_methods if query.max_episodes > 0 else ()
    # the entities the query names seed the walk, graph recall and the communities: with none of them on, no read
    seeding = "graph" in fm and (recipe.walk or recipe.graph != "off" or recipe.communities == "on")
    calls: dict[str, Callable[[], Awaitable[list[Hit]]]] = {}
    if "text" in fm and terms:
        calls["facts_text"] = lambda: store.search_facts_text(group, terms, as_of, n)
    if "vector" in fm and vector is not None:
        calls["facts_vector"] = lambda: store.search_facts_vector(group, vector, as_of, n)
    if seeding and terms:
        calls["entities_text"] = lambda: store.search_entities_text(group, terms, recipe.seed_entities)
    if seeding and vector is not None:
        calls["entities_vector"] = lambda: store.search_entities_vector(group, vector, recipe.seed_entities)
    if seeding and vector is not None and recipe.communities == "on" and isinstance(store, CommunityStore):
        calls["communities"] = lambda: store.search_communities_vector(group, vector, recipe.community_matches)
    if "text" in em and terms:
        calls["episodes_text"] = lambda: store.search_episodes_text(group, terms, n_ep)
    if "vector" in em and vector is not None:
        calls["episodes_vector"] = lambda: store.search_episodes_vector(group, vector, n_ep)
    found = dict(zip(calls, await store.gather(list(calls.values())), strict=True))

    def ranked(method: str, min_score: float | None = None) -> list[str]:
        return [h.id for h in found[method] if min_score is None or h.score >= min_score]

    rankings: list[list[str]] = []
    weights: list[float] = []
    if "facts_text" in found:
        rankings.append(ranked("facts_text"))
        weights.append(recipe.text_weight)
    if "facts_vector" in found:
        rankings.append(ranked("facts_vector", recipe.min_fact_similarity))
        weights.append(recipe.vector_weight)
    seeds = rrf([ranked(m) for m in ("entities_text", "entities_vector") if m in found], recipe.rrf_k)
    seed_ids = sorted(seeds, key=lambda i: -seeds[i])[: recipe.seed_entities]
    activated = Activated([], [])
    if seed_ids and recipe.graph != "off":  # graph recall's facts take the walk's place (graph_recall.py)
        activated = await graph_rankings(store, group, seeds, as_of, recipe, hop_skipped)  # it picks the seeds
        rankings.append(activated.facts)
        weights.append(recipe.graph_weight)
    elif seed_ids and recipe.walk:
        steps = await store.walk(group, seed_ids, as_of=as_of, max_hops=recipe.max_hops, limit=n)
        # within a hop, facts the query itself ranked high come first: the walk's order follows the query
        direct = rrf(rankings, recipe.rrf_k, weights)
        rankings.append([s.fact_id for s in sorted(
            steps, key=lambda s: (s.hop, -direct.get(s.fact_id, 0.0), -s.confidence))])
        weights.append(recipe.graph_weight)
    if found.get("communities"):
        ranking = await community_ranking(store, group, matched(found["communities"], recipe), seed_ids, as_of, recipe,
                                          rrf(rankings, recipe.rrf_k, weights))
        if ranking:
            rankings.append(ranking)
            weights.append(recipe.community_weight)
    fused = rrf(rankings, recipe.rrf_k, weights) if fm else {}
    best = sorted(fused, key=lambda i: -fused[i])[:n]
    ep_rankings = [ranked(m, recipe.min_episode_similarity if m == "episodes_vector" else None)
                   for m in ("episodes_text", "episodes_vector") if m in found]
    ep_weights = [recipe.text_weight if m == "episodes_text" else recipe.vector_weight
                  for m in ("episodes_text", "episodes_vector") if m in found]
    if activated.episodes and em:
        ep_rankings.append(activated.episodes)
        ep_weights.append(recipe.graph_episode_weight)
    fused_ep = rrf(ep_rankings, recipe.rrf_k, ep_weights) if em else {}
    best_ep = sorted(fused_ep, key=lambda i: -fused_ep[i])[: shortlisted(query.max_episodes)]
    if recipe.graph_episode_slots and activated.episodes:
        best_ep, fused_ep = with_graph_slots(best_ep, fused_ep, activated.episodes,
                                             min(query.max_episodes, SLOTS_WITHIN), recipe.graph_episode_slots)

    anchors = best_ep[: anchored(query.max_episodes)]
    with_context = bool(anchors) and recipe.context_span > 0 and (recipe.context_before > 0 or recipe.context_after > 0)
    rows, episodes, context = await store.gather([
        lambda: store.fact_standings(group, best) if best else _none(),
        # the messages' rows light: a recall shows at most max_episodes of ~40 a group (issue 36)
        lambda: store.get_episodes(group, best_ep, light=True) if best_ep else _none(),
        lambda: store.episode_context(group, anchors, span=recipe.context_span, within_s=recipe.context_within_s,
                                      light=True) if with_context else _none(),
    ])
    known = {r.id: r for r in rows}
    at_s = as_of.timestamp()
    facts: list[WeighedFact] = []
    for fact_id in best:
        row = known.get(fact_id)
        if row is None:
            continue
        standing = row if isinstance(row, Standing) else Standing.of(row)
        if forgotten(standing, at_s, recipe.forget_after_days):
            continue
        weight = fact_weight(standing, at_s, decay_rate=recipe.decay_rate, age_floor=recipe.age_floor,
                             retrieval_boost=recipe.retrieval_boost)
        facts.append(WeighedFact(group, row, fused[fact_id] * weight))
    # a message is what was said when it was said: no age weighs on it (its date is shown beside it); aged,
    # the turns of older sessions, which are most of a long conversation's evidence, lost to newer facts
    scored_eps = {ep.id: WeighedEpisode(ep, fused_ep[ep.id] * recipe.message_weight) for ep in episodes
                  if said_at(ep) <= at_s}
    return facts, with_turns_around(scored_eps, context, recipe, as_of)


def with_turns_around(scored: dict[str, WeighedEpisode], context: Sequence[Neighbour], recipe: Recipe,
                      as_of: datetime) -> list[WeighedEpisode]:
    """The recalled messages and the turns said around them, each neighbour scored from the message it sits
    beside (its own score when that is higher): the answer to a recalled question, the question a recalled
    answer replies to. Only found messages lend a score; a neighbour lends none onward."""
    out = dict(scored)
    at_s = as_of.timestamp()
    for near in context:
        anchor = scored.get(near.anchor_id)
        if anchor is None or said_at(near.episode) > at_s:
            continue
        weight = recipe.context_before if near.offset < 0 else recipe.context_after
        lent = anchor.score * weight ** abs(near.offset)
        held = out.get(near.episode.id)
        if lent > 0 and (held is None or lent > held.score):
            out[near.episode.id] = WeighedEpisode(near.episode, lent)
    return list(out.values())


async def _none() -> list[Any]:
    return []


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


async def recall(store: GraphStore, embedder: Embedder | None, query: RecallQuery,
                 recipes: Mapping[str, Recipe] = RECIPES, hop_skipped: HopSkipped | None = None) -> RecallResult:
    started = time.monotonic()
    recipe = recipe_named(query.recipe, recipes)
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
    if not groups or (not terms and not wants_vector):  # nothing to search; what was promoted is still shown
        return RecallResult(groups=groups, promoted=tuple(await promoted_for(store, groups, query.sessions,
                                                                             query.promoted)))

    def embedded() -> np.ndarray | None:
        return embedder.embed([query.text])[0] if wants_vector else None  # type: ignore[union-attr]

    order = {g: i for i, g in enumerate(groups)}

    async def search_all(view: StoreReads, vector: np.ndarray | None,
                         ) -> tuple[list[ScoredFact], list[ScoredEpisode], list[Promoted]]:
        # everything from here on is the run's own: a store may drop a run and make it again (run_reads)
        per_group = await view.gather([
            functools.partial(_search_group, view, group, terms, vector, as_of, recipe, query, hop_skipped)
            for group in groups])
        found_facts = [f for facts, _ in per_group for f in facts]
        scored_episodes = [e for _, episodes in per_group for e in episodes]
        # after the searches: their reads told the store which groups hold a promoted memory (issue 36)
        promoted = await promoted_for(view, groups, query.sessions, query.promoted, recall_since=started)
        # the same fact or message in several groups is shown once, with its best score, under the group the
        # caller named first (the shared user group before a per-agent one)
        shown = _dedupe(scored_episodes, lambda e: e.row.content.casefold(), lambda e: order[e.row.group_id],
                        lambda e: e.score, lambda e: e.row.id, query.max_episodes)
        told = _dedupe(found_facts, lambda f: f.row.fact.casefold(), lambda f: order[f.group_id],
                       lambda f: f.score, lambda f: f.row.id, query.max_facts)
        if query.max_items is not None:  # only what the one ranking keeps is read whole
            best = one_ranking(told, shown, query.max_items)
            told = [f for f in best if isinstance(f, WeighedFact)]
            shown = [e for e in best if isinstance(e, WeighedEpisode)]
        return await whole_facts(view, told), await whole_episodes(view, shown), promoted

    facts, episodes, promoted = await store.run_reads(search_all, embedded)
    by_group: dict[GroupId, list[str]] = {}
    for sf in facts:
        by_group.setdefault(sf.fact.group_id, []).append(sf.fact.id)
    for group, ids in by_group.items():
        await store.mark_retrieved(group, ids)
    return RecallResult(facts=tuple(facts), episodes=tuple(episodes), groups=groups, promoted=tuple(promoted))
