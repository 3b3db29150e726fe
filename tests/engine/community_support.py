"""Graphs with a known community structure, loaded straight into a store (rows, no extraction)."""

from __future__ import annotations

from datetime import UTC, datetime

from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Entity, Fact

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def person(group: GroupId, name: str) -> Entity:
    return Entity(id=f"{group}:{name}", group_id=group, name=name.title(), canonical_name=name, type="person",
                  first_seen=T0, last_seen=T0)


def link(group: GroupId, a: Entity, relation: str, b: Entity, *, ended: bool = False) -> Fact:
    return Fact(id=f"{group}:{a.canonical_name}:{relation}:{b.canonical_name}", group_id=group, subject_id=a.id,
                object_id=b.id, subject_name=a.name, object_name=b.name, relation=relation, edge_type="semantic",
                fact=f"{a.name} {relation.replace('_', ' ')} {b.name}", confidence=0.9, valid_at=T0,
                invalid_at=T0.replace(month=3) if ended else None, created_at=T0)


def cliques(group: GroupId, sizes: list[int], *, bridges: int = 1) -> tuple[list[Entity], list[Fact]]:
    """One clique per size (members `k<i>_<j>`), the first `bridges` cliques each tied to the next by one fact."""
    entities: list[Entity] = []
    facts: list[Fact] = []
    members = []
    for k, size in enumerate(sizes):
        group_members = [person(group, f"k{k}_{j}") for j in range(size)]
        members.append(group_members)
        entities += group_members
        facts += [link(group, a, "knows", b) for i, a in enumerate(group_members) for b in group_members[i + 1:]]
    for k in range(min(bridges, len(sizes) - 1)):
        facts.append(link(group, members[k][0], "met", members[k + 1][0]))
    return entities, facts
