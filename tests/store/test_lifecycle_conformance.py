"""The life-cycle contract (`mnemobus.store.lifecycle.Lifecycle`), once per backend through the `store` fixture."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.lifecycle import Lifecycle, Promoted, RetentionPolicy
from tests.store.test_conformance import T0, entity, fact, put

pytestmark = pytest.mark.anyio

NOW = T0 + timedelta(days=400)


async def _chain(store: GraphStore, group: GroupId) -> dict[str, object]:
    """Ana lived in Oslo (ended at T0+10d, superseded by Bergen); Ana lives in Bergen; Bob (seen only at T0) knew
    Oslo until T0+20d."""
    ana, oslo, bergen, bob = (entity(group, "Ana"), entity(group, "Oslo", kind="place"),
                              entity(group, "Bergen", kind="place"), entity(group, "Bob"))
    lived = fact(group, ana, "lives_in", oslo, "Ana lives in Oslo", fid=f"{group}:old", invalid_at=T0 + timedelta(days=10))
    lives = fact(group, ana, "lives_in", bergen, "Ana lives in Bergen", fid=f"{group}:new",
                 valid_at=T0 + timedelta(days=10))
    knew = fact(group, bob, "knows", oslo, "Bob knows Oslo", fid=f"{group}:bob", invalid_at=T0 + timedelta(days=20))
    lived = replace(lived, superseded_by=lives.id)
    await put(store, entities=[ana, oslo, bergen, bob], facts=[lived, lives, knew])
    return {"ana": ana, "oslo": oslo, "bergen": bergen, "bob": bob, "lived": lived, "lives": lives, "knew": knew}


async def test_every_backend_offers_the_lifecycle_contract(store: GraphStore) -> None:
    assert isinstance(store, Lifecycle)


async def test_facts_ended_past_retention_are_evicted_and_the_cutoff_is_their_latest_end(
        store: GraphStore, group: GroupId) -> None:
    g = await _chain(store, group)
    done = await store.evict(group, RetentionPolicy(ended_days=365), now=NOW)  # type: ignore[attr-defined]
    assert (done.facts, done.entities) == (2, 0)
    assert done.cutoff == T0 + timedelta(days=20)
    assert [f.id for f in await store.get_facts(group, [g["lived"].id, g["lives"].id, g["knew"].id])] == [g["lives"].id]  # type: ignore[attr-defined]


async def test_an_ended_fact_within_retention_is_kept(store: GraphStore, group: GroupId) -> None:
    await _chain(store, group)
    done = await store.evict(group, RetentionPolicy(ended_days=365), now=T0 + timedelta(days=300))  # type: ignore[attr-defined]
    assert done.empty and done.cutoff is None
    assert await store.count_facts(group) == 3


async def test_evicting_a_superseded_fact_leaves_its_successor_as_it_was(store: GraphStore, group: GroupId) -> None:
    g = await _chain(store, group)
    await store.evict(group, RetentionPolicy(ended_days=365), now=NOW)  # type: ignore[attr-defined]
    (kept,) = await store.get_facts(group, [g["lives"].id])  # type: ignore[attr-defined]
    assert kept.invalid_at is None and kept.valid_at == T0 + timedelta(days=10)


async def test_orphan_entities_unseen_past_retention_go_and_connected_ones_stay(store: GraphStore,
                                                                                   group: GroupId) -> None:
    g = await _chain(store, group)
    done = await store.evict(group, RetentionPolicy(ended_days=365, orphan_days=30), now=NOW)  # type: ignore[attr-defined]
    # Oslo and Bob have no active fact left; Ana and Bergen hold "Ana lives in Bergen"
    assert done.entities == 2
    left = {e.id for e in await store.get_entities(group, [g[k].id for k in ("ana", "oslo", "bergen", "bob")])}  # type: ignore[attr-defined]
    assert left == {g["ana"].id, g["bergen"].id}  # type: ignore[attr-defined]


async def test_entity_cap_evicts_the_least_connected_first(store: GraphStore, group: GroupId) -> None:
    g = await _chain(store, group)
    done = await store.evict(group, RetentionPolicy(entity_cap=3), now=NOW)  # type: ignore[attr-defined]
    # Bergen and Bob have one fact each, all were last seen at T0: the lower id (Bergen) goes, with the fact
    # that still held, so the past is incomplete up to now
    assert (done.facts, done.entities, done.cutoff) == (1, 1, NOW)
    remaining = await store.get_entities(group, [g[k].id for k in ("ana", "oslo", "bergen", "bob")])  # type: ignore[attr-defined]
    assert {e.name for e in remaining} == {"Ana", "Oslo", "Bob"}


async def test_a_dry_run_counts_what_would_go_and_removes_nothing(store: GraphStore, group: GroupId) -> None:
    await _chain(store, group)
    policy = RetentionPolicy(ended_days=365, orphan_days=30)
    dry = await store.evict(group, policy, now=NOW, dry_run=True)  # type: ignore[attr-defined]
    assert (dry.facts, dry.entities) == (2, 2)
    assert await store.count_facts(group) == 3
    assert (await store.evicted_so_far(group)).empty  # type: ignore[attr-defined]
    real = await store.evict(group, policy, now=NOW)  # type: ignore[attr-defined]
    assert (real.facts, real.entities) == (dry.facts, dry.entities)


async def test_evicted_so_far_adds_up_per_group(store: GraphStore, group: GroupId, other_group: GroupId) -> None:
    await _chain(store, group)
    await _chain(store, other_group)
    await store.evict(group, RetentionPolicy(ended_days=365), now=NOW)  # type: ignore[attr-defined]
    await store.evict(group, RetentionPolicy(orphan_days=30), now=NOW)  # type: ignore[attr-defined]
    so_far = await store.evicted_so_far(group)  # type: ignore[attr-defined]
    assert (so_far.facts, so_far.entities, so_far.cutoff) == (2, 2, T0 + timedelta(days=20))
    assert (await store.evicted_so_far(other_group)).empty  # type: ignore[attr-defined]


DAY = timedelta(days=1)


async def test_decay_shrinks_retrieval_counts_and_stale_confidence_down_to_the_floor(store: GraphStore,
                                                                                       group: GroupId) -> None:
    g = await _chain(store, group)
    lives = g["lives"].id  # type: ignore[attr-defined]
    for _ in range(10):
        await store.mark_retrieved(group, [lives])
    changed = await store.decay_retrievals(group, 0.5, min_confidence=0.3, now=NOW, every=DAY)  # type: ignore[attr-defined]
    assert changed == 3
    (f,) = await store.get_facts(group, [lives])
    assert f.retrieval_count == 5 and abs(f.confidence - 0.45) < 1e-9
    await store.decay_retrievals(group, 0.5, min_confidence=0.3, now=NOW + DAY, every=DAY)  # type: ignore[attr-defined]
    (f,) = await store.get_facts(group, [lives])
    assert f.retrieval_count == 2 and abs(f.confidence - 0.3) < 1e-9


async def test_a_group_decays_once_per_interval_however_often_asked(store: GraphStore, group: GroupId) -> None:
    g = await _chain(store, group)
    assert await store.decay_retrievals(group, 0.5, min_confidence=0.1, now=NOW, every=DAY) == 3  # type: ignore[attr-defined]
    assert await store.decay_retrievals(group, 0.5, min_confidence=0.1, now=NOW + DAY / 2, every=DAY) is None  # type: ignore[attr-defined]
    (f,) = await store.get_facts(group, [g["lives"].id])  # type: ignore[attr-defined]
    assert abs(f.confidence - 0.45) < 1e-9


async def test_decay_leaves_the_confidence_of_recently_observed_facts(store: GraphStore, group: GroupId) -> None:
    g = await _chain(store, group)
    await store.decay_retrievals(group, 0.5, min_confidence=0.1, now=T0 + DAY * 10, every=DAY * 30)  # type: ignore[attr-defined]
    (f,) = await store.get_facts(group, [g["lives"].id])  # type: ignore[attr-defined]
    assert f.confidence == 0.9


def _memory(group: GroupId, mid: str, *, scope: str = "user", session: str | None = None) -> Promoted:
    return Promoted(id=mid, group_id=group, kind="preference", scope=scope, text=f"memory {mid}", author="josh",
                    created_at=T0 + timedelta(minutes=int(mid[-1])), session=session)


async def test_promoted_memories_read_back_oldest_first_with_kind_scope_author_and_time(store: GraphStore,
                                                                                        group: GroupId) -> None:
    await store.add_promoted(_memory(group, "p2"))  # type: ignore[attr-defined]
    await store.add_promoted(_memory(group, "p1"))  # type: ignore[attr-defined]
    await store.add_promoted(_memory(group, "p1"))  # type: ignore[attr-defined]
    assert await store.promoted(group) == [_memory(group, "p1"), _memory(group, "p2")]  # type: ignore[attr-defined]


async def test_a_session_memory_is_read_only_in_its_session(store: GraphStore, group: GroupId) -> None:
    await store.add_promoted(_memory(group, "p1", scope="session", session="chan-1"))  # type: ignore[attr-defined]
    await store.add_promoted(_memory(group, "p2"))  # type: ignore[attr-defined]
    assert [m.id for m in await store.promoted(group, sessions=["chan-2"])] == ["p2"]  # type: ignore[attr-defined]
    assert [m.id for m in await store.promoted(group, sessions=["chan-1"])] == ["p1", "p2"]  # type: ignore[attr-defined]


async def test_promoted_memories_outlast_eviction_and_decay(store: GraphStore, group: GroupId) -> None:
    await _chain(store, group)
    await store.add_promoted(_memory(group, "p1"))  # type: ignore[attr-defined]
    await store.evict(group, RetentionPolicy(ended_days=0, orphan_days=0, entity_cap=0), now=NOW)  # type: ignore[attr-defined]
    await store.decay_retrievals(group, 0.1, min_confidence=0.0, now=NOW, every=DAY)  # type: ignore[attr-defined]
    assert await store.count_facts(group) == 0
    assert await store.promoted(group) == [_memory(group, "p1")]  # type: ignore[attr-defined]


async def test_a_promoted_memory_is_deleted_only_in_its_group(store: GraphStore, group: GroupId,
                                                              other_group: GroupId) -> None:
    await store.add_promoted(_memory(group, "p1"))  # type: ignore[attr-defined]
    assert not await store.delete_promoted(other_group, "p1")  # type: ignore[attr-defined]
    assert await store.delete_promoted(group, "p1")  # type: ignore[attr-defined]
    assert await store.promoted(group) == []  # type: ignore[attr-defined]


async def test_deleting_a_group_takes_its_promoted_memories_and_eviction_totals(store: GraphStore,
                                                                                group: GroupId) -> None:
    await _chain(store, group)
    await store.add_promoted(_memory(group, "p1"))  # type: ignore[attr-defined]
    assert group in await store.group_ids()
    await store.evict(group, RetentionPolicy(ended_days=365), now=NOW)  # type: ignore[attr-defined]
    await store.delete_group(group)
    assert await store.promoted(group) == []  # type: ignore[attr-defined]
    assert (await store.evicted_so_far(group)).empty  # type: ignore[attr-defined]


async def test_a_backlog_of_ended_facts_goes_in_chunks_and_adds_up_as_one_eviction(
        store: GraphStore, group: GroupId, monkeypatch: pytest.MonkeyPatch) -> None:
    import mnemobus.store.lifecycle as lifecycle

    monkeypatch.setattr(lifecycle, "EVICT_CHUNK", 1)  # one transaction per ended fact
    await _chain(store, group)
    done = await store.evict(group, RetentionPolicy(ended_days=365, orphan_days=30), now=NOW)  # type: ignore[attr-defined]
    assert (done.facts, done.entities, done.cutoff) == (2, 2, T0 + timedelta(days=20))
    so_far = await store.evicted_so_far(group)  # type: ignore[attr-defined]
    assert (so_far.facts, so_far.entities, so_far.cutoff) == (2, 2, T0 + timedelta(days=20))


async def test_migrating_a_group_takes_its_promoted_memories(store: GraphStore, group: GroupId, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mnemobus.kernel.migrate import migrate
    from mnemobus.store.sqlite import SqliteStore

    source = SqliteStore(tmp_path / "source.sqlite3")
    await source.open()
    try:
        await _chain(source, group)
        await source.add_promoted(_memory(group, "p1"))
        await migrate(source, store, [group])
        await migrate(source, store, [group])  # a second run adds nothing
    finally:
        await source.close()
    assert await store.promoted(group) == [_memory(group, "p1")]  # type: ignore[attr-defined]


async def test_migrating_a_group_takes_its_eviction_totals_and_cutoff_once(store: GraphStore, group: GroupId,
                                                                         tmp_path) -> None:  # type: ignore[no-untyped-def]
    from mnemobus.kernel.migrate import migrate
    from mnemobus.store.sqlite import SqliteStore

    source = SqliteStore(tmp_path / "source.sqlite3")
    await source.open()
    try:
        await _chain(source, group)
        await source.evict(group, RetentionPolicy(ended_days=365, orphan_days=30), now=NOW)
        await migrate(source, store, [group])
        await migrate(source, store, [group])  # a second run adds nothing
    finally:
        await source.close()
    so_far = await store.evicted_so_far(group)  # type: ignore[attr-defined]
    assert (so_far.facts, so_far.entities, so_far.cutoff) == (2, 2, T0 + timedelta(days=20))


async def test_kept_eviction_totals_only_ever_rise(store: GraphStore, group: GroupId) -> None:
    await _chain(store, group)
    await store.evict(group, RetentionPolicy(ended_days=365), now=NOW)  # type: ignore[attr-defined]
    mine = await store.evicted_so_far(group)  # type: ignore[attr-defined]
    await store.keep_evictions(group, replace(mine, facts=0, cutoff=T0))  # type: ignore[attr-defined]
    assert await store.evicted_so_far(group) == mine  # type: ignore[attr-defined]
    later = T0 + timedelta(days=30)
    await store.keep_evictions(group, replace(mine, facts=mine.facts + 5, cutoff=later))  # type: ignore[attr-defined]
    assert await store.evicted_so_far(group) == replace(mine, facts=mine.facts + 5, cutoff=later)  # type: ignore[attr-defined]


async def test_promoted_of_reads_several_groups_at_once_and_no_other(store: GraphStore, group: GroupId,
                                                                      other_group: GroupId, new_group) -> None:  # type: ignore[no-untyped-def]
    third = new_group("c")
    await store.add_promoted(_memory(group, "p1"))  # type: ignore[attr-defined]
    await store.add_promoted(_memory(other_group, "p2"))  # type: ignore[attr-defined]
    await store.add_promoted(_memory(third, "p3"))  # type: ignore[attr-defined]
    found = await store.promoted_of([group, other_group])  # type: ignore[attr-defined]
    assert [(m.id, m.group_id) for m in found] == [("p1", group), ("p2", other_group)]


async def test_graph_stats_count_what_eviction_removed_in_the_group_only(store: GraphStore, group: GroupId,
                                                                         other_group: GroupId) -> None:
    """`graph stats` (issue 39, item 5) reads the life-cycle's eviction totals: one counter, not two."""
    await _chain(store, group)
    await _chain(store, other_group)
    await store.evict(group, RetentionPolicy(ended_days=365), now=NOW)  # type: ignore[attr-defined]
    assert (await store.graph_stats(group)).evicted == 2  # type: ignore[attr-defined]
    assert (await store.graph_stats(other_group)).evicted == 0  # type: ignore[attr-defined]
