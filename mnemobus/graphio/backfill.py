"""`mnemobus backfill [--group G] [--since T]`: re-extract stored episodes with the current extractor.

The extractor improves (the offline one went from 3.6 to 24.5 facts per 100 turns in one round) and every
store keeps the graph its old extractor drew. Backfill draws the graph again, beside the real one, and
applies the difference:

1. a shadow store (a temporary SQLite file) is seeded with what is not re-extracted (the episodes before
   `--since`, the facts they support and the entities those touch), then the group's episodes from `--since`
   on are ingested into it, in time order, through `MemoryEngine.ingest_many` with the configured extractor
   and embedder: the shadow is what live ingestion would have made of them today;
2. facts and entities the shadow has and the store lacks are added; facts both have but that differ (ended,
   superseded, reinforced differently) take the shadow's version; new provenance and mentions are linked;
3. a fact still valid in the store that the shadow lacks, and that no episode outside the re-extracted ones
   supports, is no longer supported: it is ended now, with `superseded_by = "backfill"` (the cause), and kept,
   so an as-of query before the backfill answers as before.

Ids are deterministic (entity: group, name, type; fact: its endpoints, relation, start and first episode), so
the shadow gives the same ids to the same facts and a second backfill changes nothing. A checkpoint records the
groups done; a run killed mid-group does that group again (safely: the difference left to apply is what
was not yet applied). A live episode stored meanwhile is not in the snapshot and nothing it supports is ended.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from mnemobus.engine import MemoryEngine
from mnemobus.graphio.progress import Counts, ProgressLine
from mnemobus.graphio.restore import Row, write_rows
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import Entity, Fact, GroupExport, IngestOutcome

CAUSE = "backfill"
BATCH = 256
WRITE_BATCH = 500


@dataclass
class BackfillCounts:
    episodes: int = 0  # re-extracted
    added: int = 0  # facts new to the store
    updated: int = 0  # facts whose times, supersession or confidence changed
    ended: int = 0  # facts no longer supported, ended with cause backfill
    entities: int = 0  # entities new to the store

    def summary(self) -> str:
        return (f"{self.episodes} episode(s) re-extracted, {self.added} fact(s) added, {self.updated} updated, "
                f"{self.ended} ended (no longer supported), {self.entities} entities added")


def _mutable(f: Fact) -> tuple[object, ...]:
    return (f.valid_at, f.invalid_at, f.superseded_by, round(f.confidence, 9), f.last_seen)


def seed_rows(dump: GroupExport, keep: set[str]) -> list[Row]:
    """What the shadow starts from: the episodes not re-extracted (`keep`), the facts they support and every
    entity those facts join or those episodes mention; entities first, then facts, then episodes."""
    facts = [(f, v) for f, v in dump.facts if keep & set(f.episode_ids)]
    mentions: dict[str, list[str]] = {}
    for ep_id, ent_id in dump.mentions:
        if ep_id in keep:
            mentions.setdefault(ep_id, []).append(ent_id)
    wanted = {f.subject_id for f, _ in facts} | {f.object_id for f, _ in facts} | {
        e for ids in mentions.values() for e in ids}
    return ([Row(e, v) for e, v in dump.entities if e.id in wanted] + [Row(f, v) for f, v in facts]
            + [Row(ep, v, s, mentions.get(ep.id, ())) for ep, s, v in dump.episodes if ep.id in keep])


async def shadow_of(engine: MemoryEngine, dump: GroupExport, since: datetime | None, workdir: Path,
                    shown: Callable[[int], None]) -> tuple[GroupExport, set[str]]:
    """The group as the current extractor draws it, and the ids of the episodes it re-extracted."""
    from mnemobus.store.sqlite import SqliteStore

    episodes = sorted((ep for ep, screened, _ in dump.episodes), key=lambda e: (e.reference_time, e.id))
    again = [ep for ep in episodes if since is None or ep.reference_time >= since]
    again_ids = {ep.id for ep in again}
    store = SqliteStore(workdir / f"shadow-{dump.group_id}.sqlite3")
    await store.open()
    try:
        seed = seed_rows(dump, {ep.id for ep in episodes} - again_ids)
        for i in range(0, len(seed), WRITE_BATCH):
            await write_rows(store, dump.group_id, seed[i : i + WRITE_BATCH])
        shadow_engine = MemoryEngine(store, engine.extractor, engine.embedder)
        for i in range(0, len(again), BATCH):
            for outcome in await shadow_engine.ingest_many(again[i : i + BATCH]):
                if not isinstance(outcome, IngestOutcome):
                    raise outcome
            shown(min(i + BATCH, len(again)))
        return await store.export_group(dump.group_id), again_ids
    finally:
        await store.close()


async def apply_difference(store: GraphStore, group: GroupId, real: GroupExport, shadow: GroupExport,
                           again: set[str], now: datetime) -> BackfillCounts:
    """Bring the store to the shadow's graph for what was re-extracted; end what nothing supports any more."""
    counts = BackfillCounts(episodes=len(again))
    real_entities = {e.id for e, _ in real.entities}
    real_facts = {f.id: f for f, _ in real.facts}
    shadow_ids = {f.id for f, _ in shadow.facts}
    new_rows = [Row(e, v) for e, v in shadow.entities if e.id not in real_entities]
    new_rows += [Row(f, v) for f, v in shadow.facts if f.id not in real_facts]
    counts.entities = sum(isinstance(r.item, Entity) for r in new_rows)
    counts.added = len(new_rows) - counts.entities
    for i in range(0, len(new_rows), WRITE_BATCH):
        await write_rows(store, group, new_rows[i : i + WRITE_BATCH])
    changed: list[tuple[Fact, Sequence[str]]] = []
    for f, _ in shadow.facts:
        old = real_facts.get(f.id)
        if old is None:
            continue
        sources = [e for e in f.episode_ids if e not in old.episode_ids]
        if _mutable(old) != _mutable(f) or sources:
            changed.append((replace(f, expired_at=old.expired_at if old.invalid_at == f.invalid_at else f.expired_at),
                            sources))
    counts.updated = sum(1 for f, _ in changed if _mutable(real_facts[f.id]) != _mutable(f))
    unsupported = [replace(f, invalid_at=now, expired_at=now, superseded_by=CAUSE) for f in real_facts.values()
                   if f.id not in shadow_ids and (f.invalid_at is None or f.invalid_at > now)
                   and set(f.episode_ids) <= again]
    counts.ended = len(unsupported)
    episodes = {ep.id: ep for ep, _, _ in real.episodes}
    real_mentions = set(real.mentions)
    links = [m for m in shadow.mentions if m not in real_mentions and m[0] in episodes]
    for i in range(0, max(len(changed), len(unsupported), len(links)), WRITE_BATCH):
        async with store.transaction() as tx:
            for fact, sources in changed[i : i + WRITE_BATCH]:
                await tx.update_fact(fact)
                for ep_id in sources:
                    if ep_id in episodes:
                        await tx.add_fact_source(group, fact.id, ep_id, episodes[ep_id].source_message_id)
            for fact in unsupported[i : i + WRITE_BATCH]:
                await tx.update_fact(fact)
            for ep_id, ent_id in links[i : i + WRITE_BATCH]:
                await tx.link_episode_entity(group, ep_id, ent_id)
    return counts


async def backfill_group(engine: MemoryEngine, group: GroupId, since: datetime | None,
                         now: datetime | None = None) -> BackfillCounts:
    """One group, start to end; idempotent."""
    real = await engine.store.export_group(group)
    total = sum(1 for ep, _, _ in real.episodes if since is None or ep.reference_time >= since)
    line = ProgressLine(f"backfill {group}", total, describe=lambda c: f"{c.read}/{total} episodes re-extracted")
    progress = Counts()

    def shown(done: int) -> None:
        progress.read = done
        line.show(progress, done, force=done == total)

    line.show(progress, 0)
    with tempfile.TemporaryDirectory(prefix="mnemobus-backfill-") as tmp:
        shadow, again = await shadow_of(engine, real, since, Path(tmp), shown)
    line.close()
    return await apply_difference(engine.store, group, real, shadow, again, now or datetime.now(UTC))
