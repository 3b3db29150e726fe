"""Neo4j's half of CommunityStore: (:Community)-[:HAS_MEMBER]->(:Entity), as Graphiti keeps communities, and one
(:GroupUpkeep) node per group for its refresh time (the eviction totals are the life-cycle's Retention node).

A mixin of Neo4jStore (its `_read_rows` and `_write`). Times are epoch seconds (floats): nothing queries them
by range, and they come back without the driver's per-value DateTime decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from neo4j import AsyncManagedTransaction

from mnemobus.shared.groups import GroupId
from mnemobus.store.communities import Community, Edge, GraphStats, nearest_communities, node_key
from mnemobus.store.contract import Hit
from mnemobus.store.model import Vector
from mnemobus.store.neo4j.rows import run_rows

COMMUNITY_SCHEMA: tuple[str, ...] = (
    "CREATE CONSTRAINT mb_community_id IF NOT EXISTS FOR (n:Community) REQUIRE n.id IS UNIQUE",
    "CREATE INDEX mb_community_group IF NOT EXISTS FOR (n:Community) ON (n.group_id)",
    "CREATE CONSTRAINT mb_group_upkeep IF NOT EXISTS FOR (n:GroupUpkeep) REQUIRE n.group_id IS UNIQUE",
)
ACTIVE = "r.invalid_at IS NULL AND r.expired_at IS NULL"
# a deleted group leaves no community and no upkeep node (delete_group runs these in its first transaction)
DELETE_GROUP_COMMUNITIES = ("MATCH (c:Community {group_id: $g}) DETACH DELETE c",
                            "MATCH (u:GroupUpkeep {group_id: $g}) DELETE u")


def _utc(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


class Neo4jCommunities:
    """CommunityStore on the Neo4jStore's sessions."""

    async def active_edges(self, group_id: GroupId, cursor: str | None, limit: int) -> tuple[list[Edge], str | None]:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            f"MATCH ()-[r:FACT {{group_id: $g}}]->() WHERE r.id > $after AND {ACTIVE} "
            "RETURN r.id AS id, r.subject_id AS s, r.object_id AS o ORDER BY r.id LIMIT $n",
            g=group_id, after=cursor or "", n=limit)
        edges = [Edge(r["id"], r["s"], r["o"]) for r in rows]
        return edges, (edges[-1].fact_id if len(edges) == limit else None)

    async def node_keys(self, group_id: GroupId, cursor: str | None, limit: int) -> tuple[dict[str, str], str | None]:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            "MATCH (n:Entity {group_id: $g}) WHERE n.id > $after "
            "RETURN n.id AS id, n.canonical_name AS name, n.type AS type ORDER BY n.id LIMIT $n",
            g=group_id, after=cursor or "", n=limit)
        return ({r["id"]: node_key(r["name"], r["type"]) for r in rows},
                rows[-1]["id"] if len(rows) == limit else None)

    async def communities(self, group_id: GroupId) -> list[Community]:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            "MATCH (c:Community {group_id: $g}) OPTIONAL MATCH (c)-[:HAS_MEMBER]->(e:Entity) "
            "WITH c, e ORDER BY e.id WITH c, collect(e.id) AS members "
            "RETURN c.id AS id, c.fingerprint AS fp, c.summary AS summary, c.embedding AS emb, "
            "c.updated_s AS updated, members ORDER BY id", g=group_id)
        return [Community(r["id"], group_id, tuple(r["members"]), r["fp"], r["summary"],
                          np.asarray(r["emb"], np.float32) if r["emb"] is not None else None, _utc(r["updated"]))  # type: ignore[arg-type]
                for r in rows]

    async def write_communities(self, group_id: GroupId, put: Sequence[Community], drop: Sequence[str],
                                refreshed_at: datetime) -> None:
        rows = [{"id": k.id, "fp": k.fingerprint, "summary": k.summary, "size": len(k.members),
                 "emb": None if k.embedding is None else np.asarray(k.embedding, np.float32).tolist(),
                 "updated": k.updated_at.timestamp(), "members": list(k.members)} for k in put]

        async def work(tx: AsyncManagedTransaction) -> None:
            p: dict[str, Any] = {"g": group_id, "drop": list(drop), "rows": rows, "at": refreshed_at.timestamp()}
            await run_rows(tx, "MATCH (c:Community {group_id: $g}) WHERE c.id IN $drop DETACH DELETE c", p)
            await run_rows(tx, "UNWIND $rows AS k MERGE (c:Community {id: k.id}) ON CREATE SET c.group_id = $g "
                               "SET c.fingerprint = k.fp, c.summary = k.summary, c.size = k.size, "
                               "c.embedding = k.emb, c.updated_s = k.updated "
                               "WITH c, k OPTIONAL MATCH (c)-[old:HAS_MEMBER]->() DELETE old", p)
            # one community per entity: joining one leaves any other
            await run_rows(tx, "UNWIND $rows AS k MATCH (c:Community {id: k.id}) UNWIND k.members AS mid "
                               "MATCH (e:Entity {id: mid}) WHERE e.group_id = $g "
                               "OPTIONAL MATCH (:Community)-[prev:HAS_MEMBER]->(e) DELETE prev "
                               "MERGE (c)-[:HAS_MEMBER]->(e)", p)
            await run_rows(tx, "MERGE (u:GroupUpkeep {group_id: $g}) "
                               "SET u.refreshed_s = $at", p)

        await self._write(work)  # type: ignore[attr-defined]

    async def join_community(self, group_id: GroupId, community_id: str, entity_id: str) -> bool:
        async def work(tx: AsyncManagedTransaction) -> bool:
            rows = await run_rows(
                tx, "MATCH (c:Community {id: $c, group_id: $g}), (e:Entity {id: $e, group_id: $g}) "
                    "OPTIONAL MATCH (:Community)-[prev:HAS_MEMBER]->(e) DELETE prev "
                    "MERGE (c)-[:HAS_MEMBER]->(e) WITH DISTINCT c "
                    "SET c.size = COUNT { (c)-[:HAS_MEMBER]->() } RETURN c.id AS id",
                {"c": community_id, "g": group_id, "e": entity_id})
            return bool(rows)

        return await self._write(work)  # type: ignore[attr-defined]

    async def has_communities(self, group_id: GroupId) -> bool:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            "MATCH (c:Community {group_id: $g}) RETURN c.id AS id LIMIT 1", g=group_id)
        return bool(rows)

    async def community_of(self, group_id: GroupId, entity_ids: Sequence[str]) -> dict[str, str]:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            "UNWIND $ids AS eid MATCH (c:Community {group_id: $g})-[:HAS_MEMBER]->(e:Entity {id: eid}) "
            "RETURN e.id AS e, c.id AS c", g=group_id, ids=list(entity_ids))
        return {r["e"]: r["c"] for r in rows}

    async def search_communities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            "MATCH (c:Community {group_id: $g}) WHERE c.embedding IS NOT NULL RETURN c.id AS id, c.embedding AS emb",
            g=group_id)
        return nearest_communities([(r["id"], np.asarray(r["emb"], np.float32)) for r in rows], vector, limit)

    async def community_members(self, group_id: GroupId, community_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            "UNWIND $ids AS cid MATCH (c:Community {id: cid, group_id: $g})-[:HAS_MEMBER]->(e:Entity) "
            "WITH c, e ORDER BY e.id RETURN c.id AS c, collect(e.id) AS members", g=group_id, ids=list(community_ids))
        return {r["c"]: tuple(r["members"]) for r in rows}

    async def graph_stats(self, group_id: GroupId) -> GraphStats:
        rows = await self._read_rows(  # type: ignore[attr-defined]
            "CALL { MATCH (n:Entity {group_id: $g}) RETURN count(n) AS entities } "
            "CALL { MATCH ()-[r:FACT {group_id: $g}]->() "
            f"RETURN sum(CASE WHEN {ACTIVE} THEN 1 ELSE 0 END) AS active, "
            f"sum(CASE WHEN {ACTIVE} THEN 0 ELSE 1 END) AS ended }} "
            "CALL { MATCH (c:Community {group_id: $g}) RETURN count(c) AS communities, max(c.size) AS largest } "
            "CALL { OPTIONAL MATCH (u:GroupUpkeep {group_id: $g}) RETURN u.refreshed_s AS refreshed } "
            # rows eviction removed so far: the life-cycle's per-group totals (neo4j/lifecycle.py)
            "CALL { OPTIONAL MATCH (t:Retention {group_id: $g}) "
            "RETURN coalesce(t.facts, 0) + coalesce(t.entities, 0) AS evicted } "
            "RETURN entities, active, ended, communities, largest, refreshed, evicted", g=group_id)
        r = rows[0]
        return GraphStats(group_id=group_id, entities=int(r["entities"]), active_facts=int(r["active"] or 0),
                          ended_facts=int(r["ended"] or 0), communities=int(r["communities"]),
                          largest_community=int(r["largest"] or 0), last_refresh=_utc(r["refreshed"]),
                          evicted=int(r["evicted"] or 0))
