"""Named recall recipes: frozen data picked by name; `recall.py` runs any of them."""

from __future__ import annotations

from dataclasses import dataclass

from mnemobus.errors import InvalidMessage


@dataclass(frozen=True, slots=True)
class Recipe:
    name: str
    fact_methods: tuple[str, ...] = ("text", "vector", "graph")  # any of text, vector, graph
    episode_methods: tuple[str, ...] = ("text", "vector")
    candidates: int = 30  # per method and group, before fusion
    seed_entities: int = 5  # entities the graph walk starts from
    max_hops: int = 2
    rrf_k: float = 10.0  # small k: rank 1 and rank 10 differ by ~45%, so relevance outweighs age
    text_weight: float = 1.0  # full-text is the strongest single signal on conversational data (LoCoMo bench)
    vector_weight: float = 0.6
    graph_weight: float = 0.5
    min_fact_similarity: float = 0.2  # vector-only fact hits below this are noise
    decay_rate: float = 0.01  # per day: half-life of about 70 days
    min_confidence: float = 0.1  # decayed confidence below this is not recalled (but stays on disk)
    recency_rate: float = 0.01  # per day, in 1 / (1 + rate * age)
    retrieval_boost: float = 0.2  # weight of ln(1 + retrieval count)
    min_episode_similarity: float = 0.25  # vector-only episode hits below this are noise


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("hybrid"),
        Recipe("text", fact_methods=("text",), episode_methods=("text",)),
        Recipe("vector", fact_methods=("vector",), episode_methods=("vector",)),
        Recipe("graph", fact_methods=("text", "graph"), episode_methods=("text",), max_hops=3),
    )
}


def recipe_named(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise InvalidMessage("unknown_recipe", f"recall recipe {name!r} is not one of {', '.join(RECIPES)}") from None
