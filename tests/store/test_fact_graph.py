"""The in-memory walk's cut: among facts level with the limit's confidence, the lowest ids are kept.

Both stores walk through `FactEdges`, and the conformance suite holds them to one order; these cases
are the ones small graphs never reach: a hub with hundreds of equally confident facts, and ids that
share their first eight bytes on both sides of the cut.
"""

from __future__ import annotations

import random

from mnemobus.store.fact_graph import FactGraph, FactRow


def _hub(ids: list[str], confidence: float = 0.8) -> FactGraph:
    graph = FactGraph(epoch=0, version=0)
    graph.put([FactRow(fid, f"hub knows {fid}", confidence, None, None, 0.0, None, 0, "hub", f"e{n}", "knows", "RELATES_TO")
               for n, fid in enumerate(ids)])
    return graph


def _walked_ids(graph: FactGraph, limit: int) -> list[str]:
    return [fid for fid, _, _ in graph.walk(["hub"], t=1.0, max_hops=1, relations=None, edge_types=None, limit=limit)]


def test_a_hub_walk_keeps_the_lowest_ids_among_equally_confident_facts() -> None:
    ids = [f"{random.Random(n).getrandbits(128):032x}" for n in range(500)]
    assert _walked_ids(_hub(ids), limit=30) == sorted(ids)[:30]


def test_ids_sharing_their_first_eight_bytes_across_the_cut_are_told_apart_by_the_rest() -> None:
    ids = [f"samepref{n:04d}" for n in range(200, 0, -1)] + ["other"]
    assert _walked_ids(_hub(ids), limit=5) == ["other", "samepref0001", "samepref0002", "samepref0003", "samepref0004"]


def test_ids_shorter_than_eight_bytes_sort_before_their_extensions() -> None:
    ids = ["ab\x00", "ab", "abc", "b", "a"]
    assert _walked_ids(_hub(ids), limit=3) == ["a", "ab", "ab\x00"]


def test_more_confident_facts_come_first_whatever_their_ids() -> None:
    graph = _hub([f"{n:04d}" for n in range(100)])
    graph.put([FactRow("zzzz", "hub knows zzzz", 0.95, None, None, 0.0, None, 0, "hub", "ez", "knows", "RELATES_TO")])
    assert _walked_ids(graph, limit=3) == ["zzzz", "0000", "0001"]


def test_ids_added_after_a_walk_take_part_in_the_next_cut() -> None:
    graph = _hub([f"m{n:03d}" for n in range(50)])
    assert _walked_ids(graph, limit=2) == ["m000", "m001"]
    graph.put([FactRow("a000", "hub knows a000", 0.8, None, None, 0.0, None, 0, "hub", "ea", "knows", "RELATES_TO")])
    assert _walked_ids(graph, limit=2) == ["a000", "m000"]
