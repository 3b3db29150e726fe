"""Named recall recipes: frozen data picked by name; `recall.py` runs any of them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from mnemobus.shared.errors import InvalidMessage


@dataclass(frozen=True, slots=True)
class Recipe:
    name: str
    fact_methods: tuple[str, ...] = ("text", "vector", "graph")  # any of text, vector, graph
    episode_methods: tuple[str, ...] = ("text", "vector")
    candidates: int = 20  # per method and group, before fusion
    seed_entities: int = 5  # entities the graph walk starts from
    max_hops: int = 2
    rrf_k: float = 10.0  # small k: rank 1 and rank 10 differ by ~45%, so relevance outweighs age
    text_weight: float = 1.0  # full-text is the strongest single signal on conversational data (LoCoMo bench)
    vector_weight: float = 0.4
    graph_weight: float = 0.5  # the walk's facts, and graph recall's
    # the walk from the entities the query names (full-text and vector hits on entity names), max_hops over the
    # fact graph, as one more fact ranking: off in hybrid, since out of its tuning data it added nothing (the blind
    # set the same in every category, LoCoMo dev's held-out recall@10 the same; README, Recall quality) and its
    # three reads were a fifth of a recall (issue 36)
    walk: bool = False
    min_fact_similarity: float = 0.2  # vector-only fact hits below this are noise
    decay_rate: float = 0.01  # per day since last observed: the age prior halves its span in about 70 days
    age_floor: float = 0.5  # the least share of its score age leaves a fact: decay ranks, never erases
    # a source message's score beside a fact's (both fused ranks times their weight); this and the context weights
    # below are chosen on one LoCoMo dev conversation and reported on the other (README, Recall quality)
    message_weight: float = 1.6
    # the turns said around a recalled message, scored as that message's score times these weights per step away
    # (0 turns it off): a question is answered in the next turn, a reply needs the one it answers
    context_before: float = 0.6
    context_after: float = 0.7
    context_span: int = 1  # turns each side
    context_within_s: float = 3600.0  # a turn further in time than this from the message is another talk
    forget_after_days: float | None = None  # explicit forgetting: facts not observed this long are not recalled
    # weight of ln(1 + retrieval count); off by default: recall counts every fact it returns, used or not, so a
    # boost returns generic facts again and again (a loop, not a usefulness signal; figures in README, Recall quality)
    retrieval_boost: float = 0.0
    min_episode_similarity: float = 0.25  # vector-only episode hits below this are noise
    # vector-only entity hits below this are noise: with the static embedder an unrelated word ("xyzzy") is
    # 0.10-0.15 from every short name, so a small group's search listed all its entities
    min_entity_similarity: float = 0.2

    # graph recall (engine/graph_recall.py): turns and facts reached from the query's entities over the mention
    # and fact graph, one more ranking in the fusion; README, Recall quality, says what each mode gave
    graph: str = "off"  # off | bfs | activation | ppr | ppr_turns
    graph_episode_weight: float = 0.5  # weight of the ranking of turns it reaches (its facts take graph_weight)
    graph_episode_slots: int = 0  # of the turns shown, this many kept for its best turns (engine/graph_slots.py)
    graph_hops: int = 2  # 1: the seeds' own turns and facts; 2: also those of the entities one fact away
    graph_per_entity: int = 20  # links read per entity (newest turns, most confident facts)
    graph_decay: float = 0.5  # activation kept per hop
    # lateral inhibition: share of the gap to each stronger top node subtracted (0: none). With 0.1 a turn one
    # mention from a weak seed fell out whenever one turn held most of the activation
    # (tests/api/graph_doors.py)
    graph_inhibition: float = 0.0
    graph_threshold: float = 0.05  # activation below this share of the strongest is dropped
    graph_node_cap: int = 50  # entities carried to the second hop, and turns and facts kept
    graph_ppr_alpha: float = 0.5  # personalized PageRank: probability of restarting at the seeds per step
    graph_time_budget_ms: float = 20.0  # no second hop once the first has taken this long
    # SYNAPSE's per-community cap: seeds from one community (communities.md) past this many give way to the next
    # strongest elsewhere, so one cluster's names do not take every seed (0: no cap)
    graph_seeds_per_community: int = 0

    # community summaries as a recall signal (engine/community_recall.py): the facts of the communities whose
    # summaries are nearest the query, one more ranking in the fusion; off by default (README, Recall quality)
    communities: str = "off"  # off | on
    community_weight: float = 0.5
    community_matches: int = 2  # communities whose members' facts are ranked
    community_members: int = 20  # members the walk starts from (the query's own matched entities first)
    min_community_similarity: float = 0.3  # summaries further than this from the query match nothing


#: the recipe a recall uses when it names none (RecallQuery.recipe's default)
DEFAULT_RECIPE = "hybrid"

RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("hybrid"),
        Recipe("text", fact_methods=("text",), episode_methods=("text",)),
        Recipe("vector", fact_methods=("vector",), episode_methods=("vector",)),
        Recipe("graph", fact_methods=("text", "graph"), episode_methods=("text",), max_hops=3, walk=True),
    )
}


def tuned(tuning: Mapping[str, Any]) -> dict[str, Recipe]:
    """Every recipe with the configured weights (memory.recall); the methods stay each recipe's own. A key given
    as null (`rrf_k: null`, or a Settings dumped and validated again, which marks every key set) keeps the
    recipe's value: None is no weight, and recall failed on it."""
    given = {key: value for key, value in tuning.items() if value is not None}
    return {name: replace(r, **given) for name, r in RECIPES.items()}


def recipe_named(name: str, recipes: Mapping[str, Recipe] = RECIPES) -> Recipe:
    try:
        return recipes[name]
    except KeyError:
        raise InvalidMessage("unknown_recipe", f"recall recipe {name!r} is not one of {', '.join(recipes)}") from None
