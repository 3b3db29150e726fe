"""graph_episode_slots: the graph's best turns that fusion left below the shown ones take the last slots."""

from mnemobus.engine.graph_slots import with_graph_slots


def test_the_graphs_best_turns_not_shown_take_the_last_slots_and_the_score_scale_is_kept() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    scores = {"a": 6.0, "b": 5.0, "c": 4.0, "d": 3.0, "e": 2.0, "f": 1.0, "g": 0.5}
    order, new = with_graph_slots(ranked, scores, ["b", "g", "f", "e"], shown=4, slots=2)
    assert order == ["a", "b", "g", "f", "c", "d"]  # b already shown: the next two graph turns
    assert [new[t] for t in order] == [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]


def test_no_slots_or_no_graph_turns_change_nothing() -> None:
    ranked, scores = ["a", "b"], {"a": 2.0, "b": 1.0}
    assert with_graph_slots(ranked, scores, ["c"], shown=2, slots=0) == (ranked, scores)
    assert with_graph_slots(ranked, scores, [], shown=2, slots=1) == (ranked, scores)
