"""Decay ranks, it never erases: a stored fact that is still valid stays findable at any age, on every backend,
until it is ended or deleted."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemobus.engine.recall import recall
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import RecallQuery
from tests.store.test_conformance import EMB, T0, entity, fact, put

pytestmark = pytest.mark.anyio
AGES = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


async def _one_old_fact_among_fresh_ones(store: GraphStore, group: GroupId) -> str:
    """A fact about a kayak learned at T0, and fresher facts about other things."""
    me, kayak = entity(group, "Sam"), entity(group, "Kayak", kind="thing")
    old = fact(group, me, "owns", kayak, "Sam owns a red sea kayak", confidence=0.6)
    fresh = []
    for i, thing in enumerate(("bicycle", "piano", "garden", "camera")):
        other = entity(group, thing.title(), kind="thing")
        fresh.append((other, fact(group, me, "likes", other, f"Sam likes the {thing}",
                                  valid_at=T0 + timedelta(days=5000 + i))))
    await put(store, entities=[me, kayak, *(o for o, _ in fresh)], facts=[old, *(f for _, f in fresh)])
    return old.id


def _group() -> GroupId:
    return GroupId(f"forget_{uuid.uuid4().hex[:10]}")


@AGES
@given(days=st.integers(min_value=0, max_value=40 * 365))
async def test_a_valid_fact_that_matches_is_found_at_any_age(store: GraphStore, days: int) -> None:
    group = _group()
    fid = await _one_old_fact_among_fresh_ones(store, group)
    result = await recall(store, EMB, RecallQuery("the red sea kayak", (group,), as_of=T0 + timedelta(days=days)))
    assert fid in [sf.fact.id for sf in result.facts]


@AGES
@given(days=st.integers(min_value=1, max_value=40 * 365))
async def test_an_ended_fact_is_not_found_after_it_ended(store: GraphStore, days: int) -> None:
    group = _group()
    fid = await _one_old_fact_among_fresh_ones(store, group)
    [stored] = await store.get_facts(group, [fid])
    async with store.transaction() as tx:
        await tx.update_fact(replace(stored, invalid_at=T0 + timedelta(days=days)))
    later = await recall(store, EMB, RecallQuery("the red sea kayak", (group,), as_of=T0 + timedelta(days=days + 1)))
    assert fid not in [sf.fact.id for sf in later.facts]


async def test_a_deleted_fact_is_not_found(store: GraphStore) -> None:
    group = _group()
    fid = await _one_old_fact_among_fresh_ones(store, group)
    await store.delete_fact(group, fid)
    result = await recall(store, EMB, RecallQuery("the red sea kayak", (group,), as_of=T0 + timedelta(days=1)))
    assert fid not in [sf.fact.id for sf in result.facts]
