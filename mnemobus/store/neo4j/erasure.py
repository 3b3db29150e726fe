"""Deleting groups, episodes and facts, and what erasure leaves behind."""

from __future__ import annotations

from collections.abc import Sequence

from neo4j import AsyncManagedTransaction

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import DeleteCounts
from mnemobus.store.neo4j.cypher import NEW_EPOCH
from mnemobus.store.neo4j.rows import drop_facts, run_rows
from mnemobus.store.neo4j.tuning import DELETE_BATCH


class Erasure:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def delete_fact(self, group_id: GroupId, fact_id: str) -> DeleteCounts:
        async def work(tx: AsyncManagedTransaction) -> DeleteCounts:
            dropped = await drop_facts(tx, group_id, [fact_id])
            if dropped:
                await run_rows(tx, NEW_EPOCH, {"g": group_id})  # another fact may be valid again: mirrors reload
            return DeleteCounts(facts=dropped)

        counts = await self._write(work)
        if counts.facts:
            self._mark_written([group_id])
        return counts

    async def erase_residue(self) -> None:
        """Nothing a client can do: deleted records stay in Neo4j's store files and transaction logs until the
        server reuses the space or rotates the logs (db.checkpoint is Enterprise-only). docs/api.md says so."""

    async def delete_groups(self, group_ids: Sequence[GroupId]) -> DeleteCounts:
        """Group after group, not all or nothing: one group may already take several transactions (see
        delete_group); a failure part-way leaves the groups not yet reached, and calling again finishes the job."""
        return DeleteCounts.total([await self.delete_group(g) for g in group_ids])

    async def delete_group(self, group_id: GroupId) -> DeleteCounts:
        """Remove the group in transactions of at most DELETE_BATCH rows of a kind.

        A group that fits in one batch goes in one transaction, as before. A larger one
        cannot: the transaction state of 100k deleted facts exceeded the server's
        transaction memory limit (dbms.memory.transaction.total.max, 70% of a 1 GiB heap).
        Facts go first, then entities, aliases and episodes; a failure part-way leaves a
        smaller group, and calling again finishes the job.
        """
        for key in [k for k in self._retrievals if k[0] == group_id]:
            del self._retrievals[key]

        async def work(tx: AsyncManagedTransaction) -> tuple[int, int, int, bool]:
            p = {"g": group_id, "n": DELETE_BATCH}
            await run_rows(tx, NEW_EPOCH, p)  # mirrors of the group reload it (smaller, or gone)
            f = (await run_rows(tx, "MATCH ()-[r:FACT {group_id: $g}]->() WITH r LIMIT $n DELETE r RETURN count(r) AS c", p))[0]["c"]
            if f >= DELETE_BATCH:
                return f, 0, 0, False
            e = (await run_rows(tx, "MATCH (n:Entity {group_id: $g}) WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
            if e >= DELETE_BATCH:
                return f, e, 0, False
            # key and type named so the (group_id, key, type) constraint's index serves it: a label scan otherwise
            a = (await run_rows(tx, "MATCH (n:Alias) WHERE n.group_id = $g AND n.key IS NOT NULL AND n.type IS NOT NULL "
                                    "WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
            if a >= DELETE_BATCH:
                return f, e, 0, False
            ep = (await run_rows(tx, "MATCH (n:Episode {group_id: $g}) WITH n LIMIT $n DETACH DELETE n RETURN count(n) AS c", p))[0]["c"]
            if ep < DELETE_BATCH:
                await run_rows(tx, "MATCH (gv:GroupVersion {group_id: $g}) DELETE gv", p)
            return f, e, ep, ep < DELETE_BATCH

        facts = entities = episodes = 0
        if self._mirrors is not None:
            self._mirrors.drop(group_id)
        while True:
            f, e, ep, done = await self._write(work)
            facts, entities, episodes = facts + f, entities + e, episodes + ep
            if done:
                return DeleteCounts(episodes=episodes, entities=entities, facts=facts)

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

        counts = await self._write(work)
        self._mark_written([group_id])
        return counts
