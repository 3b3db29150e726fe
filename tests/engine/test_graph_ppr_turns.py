"""HippoRAG's form of graph recall (engine/graph_ppr_turns.py) on hand-made links: the restart weighs a seed by
its specificity, a fact carries the walk from entity to entity, and a turn naming two reached entities gathers
from both."""

from __future__ import annotations

from dataclasses import replace

from mnemobus.engine.graph_ppr_turns import specificity, turns_pagerank
from mnemobus.engine.graph_recall import LocalGraph
from mnemobus.engine.recipes import RECIPES, Recipe
from mnemobus.store.contract import EntityLinks
from tests.engine.test_graph_recall_scoring import hub_and_rare  # hub named in 100 turns, rare in 1, far one fact away

RECIPE = replace(RECIPES["hybrid"], graph="ppr_turns")


def walk(graph: LocalGraph, recipe: Recipe) -> tuple[list[str], list[str]]:
    return turns_pagerank(graph.seeds, (graph.near, graph.far), recipe)


def test_a_seed_restarts_the_walk_by_its_score_over_the_turns_that_mention_it() -> None:
    g = hub_and_rare()
    assert specificity(g.seeds, g.near) == {"hub": 0.01, "rare": 1.0}


def test_a_turn_of_a_rare_entity_outranks_the_turns_of_a_hub() -> None:
    turns, _ = walk(hub_and_rare(), RECIPE)
    assert turns[0] == "t_rare"
    assert turns.index("t_far") < turns.index("t_hub0")


def test_a_fact_carries_the_walk_from_entity_to_entity_in_one_step() -> None:
    turns, facts = walk(hub_and_rare(), RECIPE)
    assert "t_far" in turns and facts == ["f1"]


def test_a_turn_naming_two_reached_entities_outranks_one_naming_either() -> None:
    near = EntityLinks(mentions=(("a", "t_a"), ("b", "t_b"), ("a", "t_ab"), ("b", "t_ab")),
                       mention_degree={"a": 2, "b": 2})
    graph = LocalGraph(seeds={"a": 1.0, "b": 1.0}, near=near, far=EntityLinks(), far_entities={})
    turns, _ = walk(graph, RECIPE)
    assert turns[0] == "t_ab"


def test_it_keeps_at_most_the_node_cap() -> None:
    turns, _ = walk(hub_and_rare(), replace(RECIPE, graph_node_cap=3))
    assert len(turns) == 3


def test_no_seed_in_the_graph_reaches_nothing() -> None:
    graph = LocalGraph(seeds={"gone": 1.0}, near=EntityLinks(), far=EntityLinks(), far_entities={})
    assert walk(graph, RECIPE) == ([], [])
