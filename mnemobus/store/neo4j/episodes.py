"""Episodes as stored, counted, and the turns around them."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode, Neighbour, Said
from mnemobus.store.neo4j.cypher import EPISODE_CONTEXT, NODE_EPISODE_MAP
from mnemobus.store.neo4j.mirror import EPISODE_FIELDS
from mnemobus.store.neo4j.rows import episode_from_row


class EpisodeReads:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def get_episode(self, group_id: GroupId, episode_id: str) -> Episode | None:
        rows = await self._read_rows(
            f"MATCH (n:Episode {{id: $id, group_id: $g}}) RETURN {NODE_EPISODE_MAP} AS n", id=episode_id, g=group_id
        )
        return episode_from_row(rows[0]["n"]) if rows else None

    async def episodes(self, group_id: GroupId, last_n: int = 10) -> list[Episode]:
        rows = await self._read_rows(
            f"MATCH (n:Episode {{group_id: $g}}) RETURN {NODE_EPISODE_MAP} AS n "
            "ORDER BY n.reference_time DESC, n.created_at DESC, n.id LIMIT $k",
            g=group_id, k=int(last_n),
        )
        return [episode_from_row(r["n"]) for r in rows]

    async def count_episodes(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._read_rows("MATCH (n:Episode) RETURN count(n) AS c")
        else:
            rows = await self._read_rows("MATCH (n:Episode {group_id: $g}) RETURN count(n) AS c", g=group_id)
        return int(rows[0]["c"])

    async def count_screened(self, group_id: GroupId | None = None) -> int:
        if group_id is None:
            rows = await self._read_rows("MATCH (n:Episode) WHERE n.screened RETURN count(n) AS c")
        else:
            rows = await self._read_rows("MATCH (n:Episode {group_id: $g}) WHERE n.screened RETURN count(n) AS c", g=group_id)
        return int(rows[0]["c"])

    async def get_episodes(self, group_id: GroupId, episode_ids: Sequence[str], *,
                           light: bool = False) -> list[Episode | Said]:
        """From the group's mirror when it holds every episode asked (see `get_facts`), else from the server.
        `light`: Said rows from the mirror; the server's answer is whole episodes either way (the contract allows
        it), which recall then does not read again."""
        if not episode_ids:
            return []
        mirror = await self._mirror(group_id, confirm=False, load=False)
        held = mirror.episode_records(episode_ids, light) if mirror is not None else None
        if held is not None:
            return [_said(group_id, r) if light else episode_from_row({**r, "group_id": group_id}) for r in held]
        rows = await self._shared_read(
            "UNWIND range(0, size($ids) - 1) AS i MATCH (n:Episode {id: $ids[i], group_id: $g}) "
            f"RETURN {NODE_EPISODE_MAP} AS n ORDER BY i", ("n",),
            ids=list(episode_ids), g=group_id,
        )
        return [episode_from_row(r["n"]) for r in rows]

    async def episode_context(self, group_id: GroupId, episode_ids: Sequence[str], *, span: int,
                              within_s: float, light: bool = False) -> list[Neighbour]:
        """From the group's mirror when it holds every episode named (see `get_episodes`), else from the server;
        `light` as in `get_episodes`."""
        ids = list(dict.fromkeys(episode_ids))
        if not ids or span <= 0:
            return []
        mirror = await self._mirror(group_id, confirm=False, load=False)
        held = mirror.episode_context(ids, span, within_s, light) if mirror is not None else None
        if held is not None:
            return [Neighbour(a, o, _said(group_id, r) if light else episode_from_row({**r, "group_id": group_id}))
                    for a, o, r in held]
        rows = await self._shared_read(EPISODE_CONTEXT, ("a", "o", "n"), ids=ids, g=group_id, span=int(span),
                                       within=float(within_s))
        return [Neighbour(r["a"], int(r["o"]), episode_from_row(r["n"])) for r in rows]


def _said(group_id: GroupId, said: tuple[str, tuple[Any, ...]]) -> Said:
    """A mirror's (id, EPISODE_FIELDS' values) as recall ranks it; the whole Episode built from them only when asked."""
    episode_id, held = said
    return Said(episode_id, group_id, held[0], held[3] / 1_000_000,  # content; reference time, epoch microseconds
                functools.partial(_whole, group_id, episode_id, held))


def _whole(group_id: GroupId, episode_id: str, held: tuple[Any, ...]) -> Episode:
    return episode_from_row({"id": episode_id, "group_id": group_id, **dict(zip(EPISODE_FIELDS, held, strict=True))})
