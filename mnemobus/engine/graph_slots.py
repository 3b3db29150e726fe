"""A share of the shown turns kept for turns graph recall reached (`graph_episode_slots`).

Why: fused by weight, a turn only the graph found scores w/(1.4+w) against the tenth full-text hit's
0.55/(1.4+w) (k = 10, full-text 1.0, vector 0.4): below w = 0.55 the graph only reorders what full-text
found, and at 0.5 it lost recall. Slots let its best turns in without raising its weight over all of
them. Off by default: it must win out of its tuning fold (docs/graph-recall.md).
"""

from __future__ import annotations

from collections.abc import Sequence

#: the slots are the last of the first ten turns: what the plugin shows an agent (memory.max_episodes) and what
#: recall@10 counts, whatever a caller asks for beyond them
SLOTS_WITHIN = 10


def with_graph_slots(ranked: Sequence[str], scores: dict[str, float], graph: Sequence[str], shown: int,
                     slots: int) -> tuple[list[str], dict[str, float]]:
    """`ranked` with the graph's best turns not already among the first `shown - slots` moved up to follow them.

    The scores keep their scale: the i-th turn of the new order takes the i-th best score of the old one, so
    a later merge by score (across groups, with the turns around) keeps the order.
    """
    if slots <= 0 or not graph or not ranked:
        return list(ranked), scores
    head = list(ranked[: max(shown - slots, 0)])
    taken = set(head)
    picked = [t for t in dict.fromkeys(graph) if t not in taken][:slots]
    moved = set(picked)
    order = (head + picked + [t for t in ranked if t not in taken and t not in moved])[: len(ranked)]
    scale = sorted((scores.get(t, 0.0) for t in ranked), reverse=True)
    return order, {**scores, **{t: scale[i] for i, t in enumerate(order)}}
