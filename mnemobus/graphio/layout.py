"""Where each entity sits on the page, decided on the server: no layout library shipped to the browser.

A memory graph is mostly stars (a person and what is known about them), so each connected component is laid
out as a tree from its best-connected entity: that entity's neighbours on a sunflower spiral around it (even
density however many there are: 5,000 neighbours make a disc, not a ring 50,000 units long), and each further
entity's children fanned out beyond it, away from its parent. Components are then packed in rows, largest
first. O(entities + facts), deterministic (ties broken by id), ~50 ms for 5,000 entities.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

GOLDEN = math.pi * (3 - math.sqrt(5))  # the sunflower's angle between successive seeds
SPACING = 30.0  # distance between neighbouring entities, in page units


def _spiral(k: int) -> tuple[float, float]:
    """Seed k of a sunflower spiral around the origin; seed 0 is off the centre (the hub sits there)."""
    r = SPACING * math.sqrt(k + 1.5) * 1.1
    return r * math.cos(k * GOLDEN), r * math.sin(k * GOLDEN)


def _component_layout(nodes: list[int], adj: list[list[int]], degree: Sequence[int]) -> dict[int, tuple[float, float]]:
    root = min(nodes, key=lambda n: (-degree[n], n))
    pos: dict[int, tuple[float, float]] = {root: (0.0, 0.0)}
    queue: deque[int] = deque([root])
    while queue:
        parent = queue.popleft()
        children = [c for c in adj[parent] if c not in pos]
        if not children:
            continue
        px, py = pos[parent]
        if parent == root:
            for k, child in enumerate(children):
                dx, dy = _spiral(k)
                pos[child] = (px + dx, py + dy)
        else:
            # a fan beyond the parent, facing away from the root, wide enough for the children
            away = math.atan2(py, px)
            step = SPACING
            reach = max(SPACING * 1.5, step * len(children) / math.pi)
            spread = min(math.pi, step * len(children) / reach)
            for k, child in enumerate(children):
                angle = away + (k - (len(children) - 1) / 2) * (spread / max(len(children), 1))
                pos[child] = (px + reach * math.cos(angle), py + reach * math.sin(angle))
        queue.extend(children)
    return pos


def layout(n: int, edges: Sequence[tuple[int, int]]) -> list[tuple[float, float]]:
    """A position for each of `n` entities (numbered 0..n-1) joined by `edges`; components never overlap."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if a != b:
            adj[a].append(b)
            adj[b].append(a)
    degree = [len(set(x)) for x in adj]
    for i, x in enumerate(adj):  # deterministic: neighbours by degree, then number
        adj[i] = sorted(set(x), key=lambda m: (-degree[m], m))
    seen = [False] * n
    components: list[list[int]] = []
    for start in range(n):
        if seen[start]:
            continue
        comp, stack = [], [start]
        seen[start] = True
        while stack:
            node = stack.pop()
            comp.append(node)
            for m in adj[node]:
                if not seen[m]:
                    seen[m] = True
                    stack.append(m)
        components.append(comp)
    components.sort(key=lambda c: (-len(c), min(c)))
    placed = [_component_layout(c, adj, degree) for c in components]
    boxes = []
    for pos in placed:
        xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
        boxes.append((min(xs), min(ys), max(xs) - min(xs) + 2 * SPACING, max(ys) - min(ys) + 2 * SPACING))
    width = max(max(b[2] for b in boxes), math.sqrt(sum(b[2] * b[3] for b in boxes)) * 1.3) if boxes else 0
    out: list[tuple[float, float]] = [(0.0, 0.0)] * n
    x = y = row = 0.0
    for pos, (minx, miny, w, h) in zip(placed, boxes):
        if x > 0 and x + w > width:
            x, y, row = 0.0, y + row, 0.0
        for node, (px, py) in pos.items():
            out[node] = (round(x + px - minx + SPACING, 1), round(y + py - miny + SPACING, 1))
        x += w
        row = max(row, h)
    return out
