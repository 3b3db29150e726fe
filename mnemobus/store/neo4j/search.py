"""Candidate queries: full-text and vector searches of facts, entities and episodes, and the graph walk."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mnemobus.shared.errors import StoreUnavailable
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import EntityLinks, Hit, Step, Vector
from mnemobus.store.model import EdgeType
from mnemobus.store.neo4j.coalesce import LANE_ANN
from mnemobus.store.neo4j.cypher import ENTITY_FACTS, ENTITY_MENTIONS, NODE_SEARCH, VALID_AT, NodeSearch
from mnemobus.store.neo4j.rows import as_float_list, cosine_score, epoch_us, group_key, lucene_terms, utc_or_none
from mnemobus.store.neo4j.tuning import ANN_MAX, ANN_OVERSAMPLE, EXACT_SCAN_MAX, SHARE_TTL_S


class Search:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def search_facts_text(self, group_id: GroupId, terms: Sequence[str], as_of: datetime, limit: int) -> list[Hit]:
        """Lucene top hits, bounded by the index's own limit, then filtered to facts valid at as_of.

        The index cannot filter on time, so it is asked for 4x the hits wanted; when
        validity filtering leaves too few and the index had more to give, it is asked
        again for 10x as many, so the answer never depends on the over-fetch factor.
        """
        q = lucene_terms(terms)
        k = int(limit)
        if not q or k <= 0:
            return []
        fetch = max(4 * k, 50)
        while True:
            rows = await self._shared_read(
                "CALL db.index.fulltext.queryRelationships('mb_fact_text', $q, {limit: $fetch}) "
                "YIELD relationship AS r, score WITH collect([r, score]) AS hits "
                "RETURN size(hits) AS raw, [h IN hits WHERE h[0].group_id = $g "
                "AND (h[0].valid_at IS NULL OR h[0].valid_at <= $as_of) "
                "AND (h[0].invalid_at IS NULL OR $as_of < h[0].invalid_at) | [h[0].id, h[1]]][..$k] AS rows",
                ("raw", "rows"), q=f"+gk:{group_key(group_id)} +({q})", g=group_id, as_of=utc_or_none(as_of), k=k, fetch=fetch,
            )
            raw, hits = rows[0]["raw"], rows[0]["rows"]
            if len(hits) >= k or raw < fetch:
                return [Hit(i, float(sc)) for i, sc in hits]
            fetch *= 10

    async def _group_share(self, kind: str, count_q: str, total_q: str, group_id: GroupId) -> tuple[int, int]:
        """(rows of the group, rows of the store) in one vector index, refreshed every SHARE_TTL_S.

        Why: the vector index spans every group, so how many neighbours to ask it for
        depends on the group's share of it. Counting is index-backed but not free (tens of
        ms at 100k rows), and the share moves slowly: a figure up to a minute old sizes a
        fetch well enough, so an expired one is still used while a background count
        replaces it, and only a group never counted waits for its count.
        """
        key = (kind, group_id)
        hit = self._shares.get(key)
        if hit is None:
            return await self._count_share(key, count_q, total_q)
        if time.monotonic() - hit[0] >= SHARE_TTL_S and key not in self._refreshing:
            self._refreshing.add(key)
            task = asyncio.get_running_loop().create_task(self._count_share(key, count_q, total_q))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return hit[1], hit[2]

    async def _count_share(self, key: tuple[str, str], count_q: str, total_q: str) -> tuple[int, int]:
        try:
            rows = await self._shared_read(f"CALL {{ {count_q} }} CALL {{ {total_q} }} RETURN c, t", ("c", "t"), g=key[1])
        except StoreUnavailable:
            if key in self._shares:  # a background refresh: the old figure stays
                return self._shares[key][1], self._shares[key][2]
            raise
        finally:
            self._refreshing.discard(key)
        share = (int(rows[0]["c"]), int(rows[0]["t"]))
        if len(self._shares) > 10_000:
            self._shares.clear()
        self._shares[key] = (time.monotonic(), *share)
        return share

    async def search_facts_vector(self, group_id: GroupId, vector: Vector, as_of: datetime, limit: int) -> list[Hit]:
        """From the group's mirror when it is held (see `_mirror`), else from the server."""
        found = await self._mirror_search("fact", group_id, vector, int(limit), as_of)
        if found is not None:
            return found
        params = {"g": group_id, "v": as_float_list(vector), "as_of": utc_or_none(as_of), "k": int(limit)}
        exact = (
            "MATCH ()-[r:FACT {group_id: $g}]->() WHERE r.embedding IS NOT NULL AND " + VALID_AT + " "
            "WITH r, vector.similarity.cosine(r.embedding, $v) AS s ORDER BY s DESC, r.id LIMIT $k "
            "RETURN r.id AS id, s"
        )
        ann = (
            "CALL db.index.vector.queryRelationships('mb_fact_vec', $n, $v) YIELD relationship AS r, score "
            "WHERE r.group_id = $g AND " + VALID_AT + " WITH r ORDER BY score DESC LIMIT $k2 "
            "WITH r, vector.similarity.cosine(r.embedding, $v) AS s RETURN r.id AS id, s ORDER BY s DESC, r.id LIMIT $k"
        )
        return await self._vector_search(
            "fact", exact, ann, params,
            "MATCH ()-[r:FACT {group_id: $g}]->() RETURN count(r) AS c",
            "MATCH ()-[r:FACT]->() RETURN count(r) AS t",
        )

    async def _vector_search(
        self, kind: str, exact: str, ann: str, params: dict[str, Any], count_q: str, total_q: str
    ) -> list[Hit]:
        """Bounded nearest-neighbour search inside one group.

        A small group is scanned exactly (cheap, and exactly the embedded store's
        answer), and so is a group too small a share of the index for a bounded
        ANN query to reach its members. A large one asks the shared HNSW index for
        k neighbours scaled by the inverse of the group's share, so about 3k of
        them are the group's; if filtering still leaves fewer than k, the exact
        scan answers instead.
        Only the best 2k of the index's (possibly quantized) scores are rescored
        exactly: reading every candidate's 3 KiB embedding back was the slowest
        part of a recall at 100k facts.
        """
        k = params["k"]
        if k <= 0:
            return []
        in_group, total = await self._group_share(kind, count_q, total_q, params["g"])
        n = max(ANN_OVERSAMPLE * k * total // max(in_group, 1), 50)
        if in_group <= EXACT_SCAN_MAX + 2 * n or n > ANN_MAX:
            # small, or too small a share of the index for its neighbours to be found there
            rows = await self._shared_read(exact, ("id", "s"), **params)
            return [Hit(r["id"], cosine_score(r["s"])) for r in rows]
        rows = await self._shared_read(ann, ("id", "s"), lane=LANE_ANN, n=n, k2=2 * k, **params)
        if len(rows) < k:
            rows = await self._shared_read(exact, ("id", "s"), **params)
        return [Hit(r["id"], cosine_score(r["s"])) for r in rows]

    async def search_entities_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._node_text_search(NODE_SEARCH["entity"], group_id, terms, limit)

    async def search_entities_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        return await self._node_vector_search(NODE_SEARCH["entity"], group_id, vector, limit)

    async def search_episodes_text(self, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        return await self._node_text_search(NODE_SEARCH["episode"], group_id, terms, limit)

    async def search_episodes_vector(self, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        return await self._node_vector_search(NODE_SEARCH["episode"], group_id, vector, limit)

    async def _node_text_search(self, q: NodeSearch, group_id: GroupId, terms: Sequence[str], limit: int) -> list[Hit]:
        words = lucene_terms(terms)
        if not words or limit <= 0:
            return []
        rows = await self._shared_read(q.text, ("id", "score"), q=f"+gk:{group_key(group_id)} +({words})",
                                       g=group_id, k=int(limit))
        return [Hit(r["id"], float(r["score"])) for r in rows]

    async def _node_vector_search(self, q: NodeSearch, group_id: GroupId, vector: Vector, limit: int) -> list[Hit]:
        found = await self._mirror_search(q.kind, group_id, vector, int(limit))
        if found is not None:
            return found
        params = {"g": group_id, "v": as_float_list(vector), "k": int(limit)}
        return await self._vector_search(q.kind, q.exact, q.ann, params, q.count, q.total)

    async def walk(
        self,
        group_id: GroupId,
        entity_ids: Sequence[str],
        *,
        as_of: datetime,
        max_hops: int,
        relations: Sequence[str] | None = None,
        edge_types: Sequence[EdgeType] | None = None,
        limit: int = 50,
    ) -> list[Step]:
        """Breadth-first; each hop's facts by confidence then id, as the embedded store orders them.

        From the group's mirror when it is held and confirmed within `mirror_fresh_s` (no round
        trip), else one server query per hop. Ids, confidences and endpoint ids only: the rows are
        read by `get_facts` for the few kept.
        """
        mirror = await self._mirror(group_id, confirm=False)
        if mirror is not None:
            steps = mirror.facts.walk(list(entity_ids), epoch_us(as_of), max_hops, relations, edge_types, int(limit))
            return [Step(fid, hop, conf) for fid, hop, conf in steps]
        seen_facts: set[str] = set()
        visited: set[str] = set(entity_ids)
        frontier = list(dict.fromkeys(entity_ids))
        out: list[Step] = []
        for hop in range(1, max_hops + 1):
            if not frontier or len(out) >= limit:
                break
            rows = await self._shared_read(
                "UNWIND $front AS eid MATCH (a:Entity {id: eid, group_id: $g})-[r:FACT {group_id: $g}]-(:Entity) "
                f"WHERE {VALID_AT} AND ($rels IS NULL OR r.relation IN $rels) "
                "AND ($types IS NULL OR r.edge_type IN $types) AND NOT r.id IN $seen "
                "WITH DISTINCT r ORDER BY r.confidence DESC, r.id LIMIT $k "
                "RETURN r.id AS id, r.confidence AS c, r.subject_id AS s, r.object_id AS o", ("id", "c", "s", "o"),
                # only what can still be returned: if this hop fills the limit the walk ends here,
                # and otherwise every fact of the hop is returned and expands the frontier
                front=frontier, g=group_id, k=int(limit) - len(out), as_of=utc_or_none(as_of), seen=list(seen_facts),
                rels=list(relations) if relations else None,
                types=list(edge_types) if edge_types else None,
            )
            nxt: list[str] = []
            for x in rows:
                fid = x["id"]
                if fid in seen_facts:
                    continue
                seen_facts.add(fid)
                if len(out) < limit:
                    out.append(Step(fid, hop, float(x["c"])))
                for e in (x["s"], x["o"]):
                    if e not in visited:
                        visited.add(e)
                        nxt.append(e)
            frontier = nxt
        return out[:limit]

    async def entity_links(self, group_id: GroupId, entity_ids: Sequence[str], *, as_of: datetime,
                           per_entity: int) -> EntityLinks:
        """Mentions from the server; facts from the group's mirror when held (as `walk`), else the server, in
        the same round trip."""
        ids = list(dict.fromkeys(entity_ids))
        if not ids or per_entity <= 0:
            return EntityLinks()
        mirror = await self._mirror(group_id, confirm=False)
        at = utc_or_none(as_of)
        reads = [self._shared_read(ENTITY_MENTIONS, ("e", "eps", "n"), ids=ids, g=group_id, as_of=at, k=per_entity)]
        if mirror is None:
            reads.append(self._shared_read(ENTITY_FACTS, ("e", "fs", "n"), ids=ids, g=group_id, as_of=at,
                                           k=per_entity))
        found = await asyncio.gather(*reads)
        if mirror is not None:
            facts, fact_degree = mirror.facts.around(ids, epoch_us(as_of), per_entity)
        else:
            facts = [(f[0], r["e"], f[1], float(f[2])) for r in found[1] for f in r["fs"]]
            fact_degree = {r["e"]: int(r["n"]) for r in found[1]}
        return EntityLinks(mentions=tuple((r["e"], ep) for r in found[0] for ep in r["eps"]), facts=tuple(facts),
                           mention_degree={r["e"]: int(r["n"]) for r in found[0]}, fact_degree=fact_degree)
