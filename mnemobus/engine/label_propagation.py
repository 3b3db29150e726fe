"""Label propagation over a group's active edges: deterministic, and resumable between time slices.

Why this shape: a refresh runs in a child process (or a thread) under a time bound, so the state of a run (labels, the
iteration and the node reached) is an object that can stop at any block of nodes and go on later with the
same result as a run that never stopped. Nodes are visited in the order of their keys (canonical name and type; id
only between two equal keys) and a node keeps its label on a tie, else the tied label a fixed hash of (label, node
index) ranks first, so one graph always gives one partition, whichever order its edges were read in and whichever
group holds it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

BLOCK = 512  # nodes between two looks at the stop condition


@dataclass(frozen=True, slots=True)
class Found:
    """One community as propagation found it: sorted members, sorted intra-community facts, fingerprint."""

    id: str
    members: tuple[str, ...]
    fact_ids: tuple[str, ...]
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Picked:
    """A community found, with what its summary is made of: its most central members (most facts inside the
    community) and the facts between them."""

    found: Found
    central: tuple[str, ...]
    facts: tuple[str, ...]


Triple = tuple[str, str, str]  # (fact id, subject id, object id): what crosses to a child process


class EdgeLike(Protocol):
    @property
    def fact_id(self) -> str: ...
    @property
    def subject_id(self) -> str: ...
    @property
    def object_id(self) -> str: ...


def triples(edges: Iterable[EdgeLike]) -> list[Triple]:
    return [(e.fact_id, e.subject_id, e.object_id) for e in edges]


def fingerprint(members: Iterable[str], fact_ids: Iterable[str]) -> str:
    """Changes exactly when the membership or the facts inside the community change."""
    h = hashlib.sha256()
    for part in sorted(members):
        h.update(part.encode() + b"\x1f")
    h.update(b"\x1e")
    for part in sorted(fact_ids):
        h.update(part.encode() + b"\x1f")
    return h.hexdigest()[:32]


def community_id(group_id: str, members: Iterable[str]) -> str:
    """Named after its smallest member, so a community that gains or loses a member keeps its id (and its
    summary is redone only because its fingerprint changed)."""
    return "c_" + hashlib.sha256(f"{group_id}\x1f{min(members)}".encode()).hexdigest()[:24]


class Propagation:
    def __init__(self, edges: Iterable[Triple], keys: Mapping[str, str] | None = None) -> None:
        pairs = [(s, o, f) for f, s, o in edges if s != o]
        # by key (`node_key`: canonical name and type), not by id: ids are digests of the group, so the order (and
        # with it the start labels and the tie-breaking) depended on the group's name rather than on the graph
        keys = keys or {}
        self.nodes = sorted({n for s, o, _ in pairs for n in (s, o)}, key=lambda n: (keys.get(n, ""), n))
        index = {n: i for i, n in enumerate(self.nodes)}
        self.adjacency: list[list[int]] = [[] for _ in self.nodes]
        self.edges = [(index[s], index[o], f) for s, o, f in pairs]
        for s, o, _ in self.edges:  # one entry per fact: two facts between a pair weigh twice
            self.adjacency[s].append(o)
            self.adjacency[o].append(s)
        for row in self.adjacency:
            row.sort()
        self.labels = list(range(len(self.nodes)))  # a label is the index of a node: first key, smallest label
        self.iteration = 0
        self.position = 0
        self.moved = False
        self.done = not self.nodes

    def run(self, stop: Callable[[], bool], max_iterations: int) -> bool:
        """Propagate until stable or `max_iterations`; True when finished, False when `stop()` said so first
        (always after at least one block, so repeated short slices still finish)."""
        labels, adjacency, n = self.labels, self.adjacency, len(self.nodes)
        first = True
        while not self.done:
            i = self.position
            while i < n:
                if not first and i % BLOCK == 0 and stop():
                    self.position = i
                    return False
                first = False
                row = adjacency[i]
                i += 1
                if not row:
                    continue
                best = _best(row, labels, labels[i - 1], i - 1)
                if best != labels[i - 1]:
                    labels[i - 1] = best
                    self.moved = True
            self.iteration += 1
            self.position = 0
            if not self.moved or self.iteration >= max_iterations:
                self.done = True
            self.moved = False
        return True

    def communities(self, group_id: str, min_size: int = 2) -> list[Found]:
        """The partition, communities of at least `min_size` members, by id."""
        members: dict[int, list[int]] = {}
        for node, label in enumerate(self.labels):
            members.setdefault(label, []).append(node)
        facts: dict[int, list[str]] = {}
        for s, o, fact_id in self.edges:
            if self.labels[s] == self.labels[o]:
                facts.setdefault(self.labels[s], []).append(fact_id)
        found = []
        for label, nodes in members.items():
            if len(nodes) < min_size:
                continue
            ids = tuple(sorted(self.nodes[i] for i in nodes))
            inside = tuple(sorted(facts.get(label, ())))
            found.append(Found(community_id(group_id, ids), ids, inside, fingerprint(ids, inside)))
        return sorted(found, key=lambda f: f.id)

    def picked(self, group_id: str, members: int, facts: int) -> list[Picked]:
        """The communities with their summaries' central members and facts: pure CPU over every edge, so it runs
        wherever the propagation ran (a child process) rather than on the caller's event loop."""
        ends = {f: (self.nodes[s], self.nodes[o]) for s, o, f in self.edges}
        out = []
        for found in self.communities(group_id):
            degree: Counter[str] = Counter()
            for fact_id in found.fact_ids:
                s, o = ends[fact_id]
                degree[s] += 1
                degree[o] += 1
            central = sorted(found.members, key=lambda m: (-degree[m], m))[:members]
            weight = {fid: degree[ends[fid][0]] + degree[ends[fid][1]] for fid in found.fact_ids}
            top = sorted(found.fact_ids, key=lambda fid: (-weight[fid], fid))[:facts]
            out.append(Picked(found, tuple(central), tuple(top)))
        return out


def _best(row: list[int], labels: list[int], current: int, node: int) -> int:
    """The most frequent neighbour label (weighted by facts); on a tie the current one, else the tied label that
    `_tie_key` ranks first. Always the smallest label flooded a whole graph from its first node in the first
    pass, when every count is 1: a fixed, node-dependent pseudo-random order keeps the choice deterministic
    without that."""
    if len(row) == 1:
        return labels[row[0]]
    counts: dict[int, int] = {}
    for j in row:
        label = labels[j]
        counts[label] = counts.get(label, 0) + 1
    top = max(counts.values())
    if counts.get(current, 0) == top:
        return current
    return min((label for label, c in counts.items() if c == top), key=lambda label: _tie_key(label, node))


def _tie_key(label: int, node: int) -> tuple[int, int]:
    return (((label + 1) * 0x9E3779B1) ^ ((node + 1) * 0x85EBCA77)) & 0xFFFFFFFF, label
