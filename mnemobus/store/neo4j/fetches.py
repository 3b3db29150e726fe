"""Whole rows by id, as-of snapshots, histories and counts; how a recall's reads are run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore, side_by_side
from mnemobus.store.model import Entity, Fact
from mnemobus.store.neo4j.cypher import FACT_RETURN, NODE_ENTITY_MAP, VALID_AT
from mnemobus.store.neo4j.rows import entity_from_row, fact_from_row, utc_or_none

T = TypeVar("T")
P = TypeVar("P")


class Fetches:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def run_reads(self, work: Callable[[GraphStore, P], Awaitable[T]], prepare: Callable[[], P]) -> T:
        """`prepare` (embedding the query) on a worker thread, then the reads on this loop, where they coalesce."""
        prepared = await anyio.to_thread.run_sync(prepare)
        return await work(self, prepared)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """Side by side: reads issued in one turn share a round trip (see coalesce.py)."""
        return await side_by_side(calls)

    async def fact_standings(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Fact]:
        """Whole facts: from the mirror they cost no more than standings, and recall need not read them again."""
        return await self.get_facts(group_id, fact_ids)

    async def get_facts(self, group_id: GroupId, fact_ids: Sequence[str]) -> list[Fact]:
        """From the group's mirror when it holds every fact asked and was confirmed within `mirror_fresh_s`
        (as `walk` trusts it: in a recall, by the candidate round just before), else from the server.

        The mirror holds every field of a fact, each write of one (renamed endpoints, new sources, updates,
        retrieval counts) stamps it, and deletions reload the group: the answer is the server's.
        """
        if not fact_ids:
            return []

        async def read() -> list[Fact]:
            mirror = await self._mirror(group_id, confirm=False, load=False)
            held = mirror.fact_records(fact_ids) if mirror is not None else None
            if held is not None:
                return [fact_from_row({**r, "group_id": group_id}, sn, on) for r, sn, on in held]
            rows = await self._shared_read(
                "UNWIND range(0, size($ids) - 1) AS i MATCH (s:Entity)-[r:FACT {id: $ids[i], group_id: $g}]->(o:Entity) "
                f"RETURN {FACT_RETURN} ORDER BY i", ("r", "sn", "on"),
                ids=list(fact_ids), g=group_id,
            )
            return [fact_from_row(x["r"], x["sn"], x["on"]) for x in rows]

        return await self._counted(group_id, read)

    async def _fact_rows(self, group_id: GroupId, query: str, **params: Any) -> list[Fact]:
        """Facts a query returns as FACT_RETURN, with this process's own retrieval counts (see _counted)."""

        async def read() -> list[Fact]:
            return [fact_from_row(x["r"], x["sn"], x["on"]) for x in await self._read_rows(query, g=group_id, **params)]

        return await self._counted(group_id, read)

    async def get_entities(self, group_id: GroupId, entity_ids: Sequence[str]) -> list[Entity]:
        rows = await self._read_rows(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (n:Entity {id: $ids[i], group_id: $g}) "
            f"RETURN {NODE_ENTITY_MAP} AS n ORDER BY i",
            ids=list(entity_ids), g=group_id,
        )
        return [entity_from_row(r["n"]) for r in rows]

    async def facts_valid_at(self, group_id: GroupId, as_of: datetime, limit: int = 1000) -> list[Fact]:
        return await self._fact_rows(
            group_id, f"MATCH (s:Entity)-[r:FACT {{group_id: $g}}]->(o:Entity) WHERE {VALID_AT} "
            f"RETURN {FACT_RETURN} ORDER BY r.valid_at IS NOT NULL, r.valid_at, r.id LIMIT $k",
            as_of=utc_or_none(as_of), k=int(limit),
        )

    async def edge_history(self, group_id: GroupId, subject_id: str, relation: str | None = None) -> list[Fact]:
        return await self._fact_rows(
            group_id, "MATCH (s:Entity)-[r:FACT {group_id: $g, subject_id: $s}]->(o:Entity) "
            "WHERE $rel IS NULL OR r.relation = $rel "
            f"RETURN {FACT_RETURN} ORDER BY r.valid_at IS NULL, r.valid_at DESC, r.created_at DESC, r.id",
            s=subject_id, rel=relation,
        )

    async def episode_facts(self, group_id: GroupId, episode_ids: Sequence[str]) -> list[Fact]:
        if not episode_ids:
            return []
        return await self._fact_rows(
            group_id, "MATCH (s:Entity)-[r:FACT {group_id: $g}]->(o:Entity) WHERE any(e IN r.episode_ids WHERE e IN $eps) "
            f"RETURN {FACT_RETURN}", eps=list(dict.fromkeys(episode_ids)),
        )

    async def count_facts(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._read_rows("MATCH ()-[r:FACT]->() RETURN count(r) AS c")
        else:
            rows = await self._read_rows("MATCH ()-[r:FACT {group_id: $g}]->() RETURN count(r) AS c", g=group_id)
        return int(rows[0]["c"])
