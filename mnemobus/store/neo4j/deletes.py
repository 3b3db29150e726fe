"""Deleting groups, episodes and facts, and what erasure leaves behind (groups all or nothing: erasure.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from neo4j import AsyncManagedTransaction

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import DeleteCounts
from mnemobus.store.neo4j import erasure
from mnemobus.store.neo4j.cypher import NEW_EPOCH
from mnemobus.store.neo4j.rows import drop_facts, run_rows


class Deletes:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def delete_fact(self, group_id: GroupId, fact_id: str) -> DeleteCounts:
        async def work(tx: AsyncManagedTransaction) -> DeleteCounts:
            dropped = await drop_facts(tx, group_id, [fact_id])
            if dropped:
                await run_rows(tx, NEW_EPOCH, {"g": group_id})  # another fact may be valid again: mirrors reload
            return DeleteCounts(facts=dropped)

        with self._committing([group_id]):
            return await self._write(work)

    async def erase_residue(self) -> None:
        """Nothing a client can do: deleted records stay in Neo4j's store files and transaction logs until the
        server reuses the space or rotates the logs (db.checkpoint is Enterprise-only). docs/api.md says so."""

    async def delete_groups(self, group_ids: Sequence[GroupId]) -> DeleteCounts:
        """All or nothing: in one transaction when the groups fit, else journalled and finished (erasure.py)."""
        return await erasure.erase(self, group_ids)  # type: ignore[arg-type]

    async def delete_group(self, group_id: GroupId) -> DeleteCounts:
        return await erasure.erase(self, [group_id])  # type: ignore[arg-type]

    async def erasure_counts(self, group_ids: Sequence[GroupId]) -> dict[GroupId, int]:
        return await erasure.erasure_counts(self, group_ids)  # type: ignore[arg-type]

    def forget_groups(self, group_ids: Iterable[str]) -> None:
        """Drop what this process holds of the groups (retrieval counts not yet written, mirrors): they are erased."""
        gone = set(group_ids)
        for key in [k for k in self._retrievals if k[0] in gone]:
            del self._retrievals[key]
        if self._mirrors is not None:
            for g in gone:
                self._mirrors.drop(g)

    async def delete_episode(self, group_id: GroupId, episode_id: str) -> DeleteCounts:
        """Forget one episode (a user's "delete that message"), in one transaction.

        The episode leaves every fact's provenance; a fact left with no source
        goes, and the facts it had superseded become valid again (the
        contradiction came from the forgotten episode). An entity the episode
        mentioned goes once no episode mentions it and no fact names it, with
        its aliases. Finding the sourced facts scans the group's facts (no
        index over a list property): deletions are rare, recall is not.
        """

        async def work(tx: AsyncManagedTransaction) -> DeleteCounts:
            p = {"g": group_id, "ep": episode_id}
            if not await run_rows(tx, "MATCH (n:Episode {id: $ep, group_id: $g}) RETURN n.id AS id", p):
                return DeleteCounts()
            await run_rows(tx, NEW_EPOCH, p)  # facts go and others become valid again: mirrors reload the group
            sourced = await run_rows(
                tx,
                "MATCH ()-[r:FACT {group_id: $g}]->() WHERE $ep IN coalesce(r.episode_ids, []) "
                "WITH r, [i IN range(0, size(r.episode_ids) - 1) WHERE r.episode_ids[i] <> $ep] AS keep "
                "WITH r, [i IN keep | r.episode_ids[i]] AS eps, [i IN keep | r.source_message_ids[i]] AS sms "
                "SET r.episode_ids = eps, r.source_message_ids = sms "
                "RETURN r.id AS id, size(eps) = 0 AS orphan",
                p,
            )
            orphans = [r["id"] for r in sourced if r["orphan"]]
            await drop_facts(tx, group_id, orphans)
            gone = await run_rows(
                tx,
                "MATCH (ep:Episode {id: $ep, group_id: $g}) "
                "OPTIONAL MATCH (ep)-[:MENTIONS]->(e:Entity {group_id: $g}) "
                "WITH ep, collect(DISTINCT e) AS mentioned DETACH DELETE ep "
                "WITH mentioned UNWIND mentioned AS e "
                "WITH e WHERE NOT EXISTS { (e)<-[:MENTIONS]-(:Episode) } AND NOT EXISTS { (e)-[:FACT]-() } "
                "OPTIONAL MATCH (a:Alias {group_id: $g})-[:ALIAS_OF]->(e) "
                "WITH e, collect(a) AS aliases FOREACH (a IN aliases | DETACH DELETE a) DETACH DELETE e "
                "RETURN count(*) AS c",
                p,
            )
            return DeleteCounts(episodes=1, entities=int(gone[0]["c"]) if gone else 0, facts=len(orphans))

        with self._committing([group_id]):
            return await self._write(work)
