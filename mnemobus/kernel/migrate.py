"""`mnemobus migrate`: copy groups between stores (embedded SQLite <-> Neo4j), counts checked.

Users start on the embedded store and move to Neo4j when they outgrow one
machine (and back, for a local copy). Rows are copied as stored, embeddings
included, so nothing is re-extracted or re-embedded and recall gives the same
answers afterwards. Each episode's rows are written through the store's one
write transaction (the same path ingestion takes), one batch per transaction,
so an interrupted run can simply be started again: episodes already present
are skipped, and entities and facts already present are left alone.

A source store must offer `group_ids()` and `export_group(group_id)` (the
`Exportable` protocol below) besides the GraphStore contract.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from mnemobus.shared.errors import MnemobusError
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.lifecycle import Lifecycle
from mnemobus.store.model import GroupExport

BATCH = 200


@runtime_checkable
class Exportable(Protocol):
    async def group_ids(self) -> list[GroupId]:
        """Every group the store holds."""

    async def export_group(self, group_id: GroupId) -> GroupExport:
        """All rows of the group, with embeddings and screening flags."""


@dataclass(frozen=True, slots=True)
class GroupCounts:
    group_id: GroupId
    episodes: int
    entities: int
    facts: int


class MigrationMismatch(MnemobusError):
    """After copying, the destination's counts differ from the source's; the message lists them."""


Progress = Callable[[str, int, int], None]  # (what, done, total)


def text_progress(what: str, done: int, total: int) -> None:
    """A one-line progress bar on stderr (the CLI's default)."""
    import sys

    width = 30
    filled = width if total == 0 else int(width * done / total)
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\r{what:<32.32} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{end}")
    sys.stderr.flush()


async def migrate(
    src: GraphStore,
    dst: GraphStore,
    group_ids: Sequence[GroupId] | None = None,
    progress: Progress | None = None,
) -> list[GroupCounts]:
    """Copy the named groups (all when None) from src to dst; return per-group counts, verified on dst."""
    if not isinstance(src, Exportable):
        raise MnemobusError(f"the {src.name} store cannot export groups (it lacks group_ids/export_group)")
    groups = list(group_ids) if group_ids is not None else await src.group_ids()
    report = progress or (lambda what, done, total: None)
    results: list[GroupCounts] = []
    mismatches: list[str] = []
    for gid in groups:
        dump = await src.export_group(gid)
        total = len(dump.episodes) + len(dump.entities) + len(dump.facts)
        done = 0
        what = f"{gid}"
        report(what, done, total)
        # entities first (facts need their endpoints), then facts, then episodes and their mentions
        for rows, lookup, insert in (
            (dump.entities, dst.get_entities, lambda tx, row: tx.insert_entity(*row)),
            (dump.facts, dst.get_facts, lambda tx, row: tx.insert_fact(*row)),
        ):
            present = {x.id for x in await lookup(gid, [r.id for r, _ in rows])} if rows else set()
            for chunk in _chunks([row for row in rows if row[0].id not in present], BATCH):
                async with dst.transaction() as tx:
                    for row in chunk:
                        await insert(tx, row)
                done += len(chunk)
                report(what, done, total)
            done += len(present)
        mentions: dict[str, list[str]] = {}
        for ep_id, ent_id in dump.mentions:
            mentions.setdefault(ep_id, []).append(ent_id)
        for chunk in _chunks(dump.episodes, BATCH):
            async with dst.transaction() as tx:
                for ep, screened, vec in chunk:
                    if await tx.insert_episode(ep, screened=screened, embedding=vec):
                        for ent_id in mentions.get(ep.id, ()):
                            await tx.link_episode_entity(gid, ep.id, ent_id)
            done += len(chunk)
            report(what, done, total)
        await copy_promoted(src, dst, gid)
        counts = GroupCounts(
            gid, await dst.count_episodes(gid), len(await dst.get_entities(gid, [e.id for e, _ in dump.entities])),
            await dst.count_facts(gid),
        )
        want = GroupCounts(gid, await src.count_episodes(gid), len(dump.entities), await src.count_facts(gid))
        if counts != want:
            mismatches.append(f"{gid}: source {want}, destination {counts}")
        results.append(counts)
    if mismatches:
        raise MigrationMismatch("counts differ after migration:\n  " + "\n  ".join(mismatches))
    return results


async def copy_promoted(src: GraphStore, dst: GraphStore, group_id: GroupId) -> None:
    """A group's promoted memories go with it (ids kept: a second run adds none), and its eviction totals and
    cutoff (raised to the source's, so a rerun changes nothing): without them an as-of query older than what was
    evicted answered from a silently thinner past once the group had moved."""
    if isinstance(src, Lifecycle) and isinstance(dst, Lifecycle):
        for memory in await src.promoted(group_id):
            await dst.add_promoted(memory)
        totals = await src.evicted_so_far(group_id)
        if not totals.empty or totals.cutoff is not None:
            await dst.keep_evictions(group_id, totals)


def _chunks(items: list, size: int) -> list[list]:  # type: ignore[type-arg]
    return [items[i : i + size] for i in range(0, len(items), size)]
