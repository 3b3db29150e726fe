"""How each graph mode ranks the neighbourhood it read (engine/graph_recall.py), on hand-made links: a hub lends
each turn a small share, a second hop lends less than a first, and each mode keeps within its caps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mnemobus.engine.graph_recall import LocalGraph, by_hops, pagerank, spread
from mnemobus.engine.recipes import RECIPES
from mnemobus.store.contract import EntityLinks

RECIPE = RECIPES["hybrid"]


def hub_and_rare() -> LocalGraph:
    """Two equally strong seeds: `hub` is named in 100 turns (20 read), `rare` in one; `rare` is in one fact with
    `far`, whose own turn is `t_far`."""
    hub_turns = [("hub", f"t_hub{i}") for i in range(20)]
    near = EntityLinks(mentions=(*hub_turns, ("rare", "t_rare")), facts=(("f1", "rare", "far", 0.9),),
                       mention_degree={"hub": 100, "rare": 1}, fact_degree={"rare": 1})
    far = EntityLinks(mentions=(("far", "t_far"),), mention_degree={"far": 1})
    return LocalGraph(seeds={"hub": 1.0, "rare": 1.0}, near=near, far=far, far_entities={"far": 0.45})


@pytest.mark.parametrize("rank", [lambda g: spread(g, RECIPE), lambda g: pagerank(g, RECIPE)],
                         ids=["activation", "ppr"])
def test_a_turn_of_a_rare_entity_outranks_the_turns_of_a_hub(rank) -> None:  # type: ignore[no-untyped-def]
    episodes = rank(hub_and_rare()).episodes
    assert episodes[0] == "t_rare"
    assert episodes.index("t_far") < episodes.index("t_hub0")


def test_activation_one_fact_away_is_less_than_at_the_seed() -> None:
    episodes = spread(hub_and_rare(), RECIPE).episodes
    assert episodes.index("t_rare") < episodes.index("t_far")


def test_activation_drops_turns_below_the_threshold_share_of_the_strongest() -> None:
    episodes = spread(hub_and_rare(), replace(RECIPE, graph_threshold=0.2)).episodes
    assert "t_rare" in episodes and not any(e.startswith("t_hub") for e in episodes)


def test_every_mode_keeps_at_most_the_node_cap() -> None:
    capped = replace(RECIPE, graph_node_cap=3)
    assert len(spread(hub_and_rare(), capped).episodes) == 3
    assert len(pagerank(hub_and_rare(), capped).episodes) == 3
    assert len(by_hops(hub_and_rare(), capped).episodes) == 3


def test_bfs_gives_the_seeds_turns_before_those_one_fact_away() -> None:
    episodes = by_hops(hub_and_rare(), RECIPE).episodes
    assert episodes[-1] == "t_far" and len(episodes) == 22


@pytest.mark.anyio
async def test_seeds_past_the_per_community_cap_give_way_to_the_next_strongest_elsewhere(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from mnemobus.engine.graph_recall import chosen_seeds
    from mnemobus.store.communities import Community
    from mnemobus.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "m.sqlite3")
    await store.open()
    now = datetime.now(UTC)
    await store.write_communities("g", [Community("c1", "g", ("a", "b", "c"), "fp", "", None, now)], [], now)
    candidates = {"a": 1.0, "b": 0.9, "c": 0.8, "x": 0.5, "y": 0.4, "z": 0.3}
    three = replace(RECIPE, seed_entities=3)
    try:
        assert list(await chosen_seeds(store, "g", candidates, three)) == ["a", "b", "c"]
        capped = await chosen_seeds(store, "g", candidates, replace(three, graph_seeds_per_community=1))
        assert list(capped) == ["a", "x", "y"]
    finally:
        await store.close()
