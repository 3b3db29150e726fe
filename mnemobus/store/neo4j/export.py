"""Every group and every row of one (for `mnemobus migrate`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Vector
from mnemobus.store.model import GroupExport
from mnemobus.store.neo4j.rows import entity_from_row, episode_from_row, fact_from_row


class Export:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def export_group(self, group_id: GroupId) -> GroupExport:
        """Every row of the group with embeddings and screening flags, for `mnemobus migrate`."""
        await self.flush_retrievals()  # the copy carries every count
        eps = await self._read_rows(
            "MATCH (n:Episode {group_id: $g}) RETURN n {.*} AS n ORDER BY n.reference_time, n.id", g=group_id
        )
        ents = await self._read_rows("MATCH (n:Entity {group_id: $g}) RETURN n {.*} AS n ORDER BY n.id", g=group_id)
        facts = await self._read_rows(
            "MATCH (s:Entity)-[r:FACT {group_id: $g}]->(o:Entity) RETURN r {.*} AS r, s.name AS sn, o.name AS on "
            "ORDER BY r.created_at, r.id",
            g=group_id,
        )
        links = await self._read_rows(
            "MATCH (ep:Episode {group_id: $g})-[:MENTIONS]->(e:Entity {group_id: $g}) RETURN ep.id AS ep, e.id AS e",
            g=group_id,
        )

        def v(x: Any) -> Vector | None:
            return None if x is None else np.asarray(x, dtype=np.float32)

        return GroupExport(
            group_id=group_id,
            episodes=[(episode_from_row(r["n"]), bool(r["n"].get("screened")), v(r["n"].get("embedding"))) for r in eps],
            entities=[(entity_from_row(r["n"]), v(r["n"].get("embedding"))) for r in ents],
            facts=[(fact_from_row(r["r"], r["sn"], r["on"]), v(r["r"].get("embedding"))) for r in facts],
            mentions=[(r["ep"], r["e"]) for r in links],
        )

    async def group_ids(self) -> list[GroupId]:
        """Every group that has an episode, an entity or a promoted memory."""
        rows = await self._read_rows(
            "CALL { MATCH (n:Episode) RETURN DISTINCT n.group_id AS g UNION MATCH (n:Entity) RETURN DISTINCT n.group_id AS g "
            "UNION MATCH (n:Promoted) RETURN DISTINCT n.group_id AS g } "
            # a node some other program wrote without a group (another tool's data in the same database) is no group
            "WITH g WHERE g IS NOT NULL RETURN g ORDER BY g"
        )
        return [GroupId(r["g"]) for r in rows]
