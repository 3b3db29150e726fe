"""The group mirrors of this process (see mirror.py): which mirror a read may use, how it catches up with
the writes of every process (the group's version and epoch), loading, warming and the vector searches it answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

import numpy as np
from neo4j import READ_ACCESS, AsyncResult, Query

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Hit, Vector
from mnemobus.store.neo4j.cypher import RECENT_GROUPS, VERSION_QUERY
from mnemobus.store.neo4j.mirror import DELTA, KINDS, LOAD_COLUMNS, PAGE, SIZES, UNSTAMPED, GroupMirror
from mnemobus.store.neo4j.rows import epoch_us
from mnemobus.store.neo4j.tuning import (LOAD_FETCH, LOAD_PAGE, LOAD_PAGE_TIMEOUT_S, LOAD_TIMEOUT_S, MIRROR_TOO_BIG_S,
                                         MIRROR_WAIT_S, OWN_WRITE_WAIT_S)

log = logging.getLogger("mnemobus.store.neo4j.store")  # one log for the whole store


class Mirroring:
    """A part of Neo4jStore (store.py), which holds the driver, the locks and the caches these use."""

    async def _group_version(self, group_id: str) -> tuple[str | None, int, float]:
        """(epoch, version, when asked) of the group, read in the statement of the reads queued beside it.

        Reads of one event-loop turn share one version read: it is sent after all of them were
        issued, so its answer is at least as new as each of them needs.
        """
        shared = self._version_reads.get(group_id) if self.coalesce_reads else None
        if shared is None:
            shared = (self._enqueue(VERSION_QUERY, ("e", "v", "p"), 0, {"g": group_id}), time.monotonic())
            if self.coalesce_reads:
                self._version_reads[group_id] = shared
        rows = await asyncio.shield(shared[0])
        self._promoted_seen(group_id, bool(rows[0]["p"]), shared[1])
        return rows[0]["e"], int(rows[0]["v"]), shared[1]

    async def _mirror(self, group_id: str, *, confirm: bool, load: bool = True,
                      known: tuple[str | None, int] | None = None) -> GroupMirror | None:
        """The group's mirror, caught up with the group's current version; None when the server must answer.

        `confirm`: ask for the version now (vector searches, which share the read with the full-text
        queries of their round). Otherwise a version confirmed within `mirror_fresh_s` will do (a
        walk: the second round of a recall, whose first round has just confirmed it), so writes of
        other processes reach a walk at most that late. This process's own writes mark the mirror
        unconfirmed at commit. A group not mirrored starts loading in the background; the server
        answers until it is loaded (a small group loads within MIRROR_WAIT_S and is used at once);
        `load=False`: a group not mirrored yet is answered by the server without starting a load.
        `known`: the group's (epoch, version) read just now under its write lock, which stands in for the
        version read (nobody else commits to the group before the lock is released).
        """
        if self._mirrors is None:
            return None
        mirror = self._mirrors.get(group_id)
        if mirror is None and load:
            mirror = await self._loaded_within(group_id, MIRROR_WAIT_S)
        if mirror is None:
            return None
        committing = self._mirrors.is_committing(group_id)
        if not confirm and not committing and time.monotonic() - mirror.checked_at <= self.mirror_fresh_s:
            return mirror
        epoch, version, asked = (*known, time.monotonic()) if known else await self._group_version(group_id)
        if epoch != mirror.epoch:  # rows were deleted (or the group's first version was written): reload
            self._mirrors.drop(group_id)
            if not load:
                return None
            mirror = await self._loaded_within(group_id, MIRROR_WAIT_S)
            if mirror is None or mirror.epoch != epoch:
                return None
        counting = self._counting.get(group_id)
        if version > mirror.version and counting is not None:
            # this process's retrieval counts are being written: when the version read saw them committed,
            # they reach the mirror with the write's answer, which is on its way (see _own_counts_written)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(counting.wait(), OWN_WRITE_WAIT_S)
        if version > mirror.version:
            try:
                await self._catch_up(group_id, mirror, version)
            except Exception as exc:  # noqa: BLE001 - the server answers; the next read loads the group afresh
                log.warning("catching up the mirror of group %s failed: %s", group_id, exc, exc_info=True)
                self._mirrors.drop(group_id)
                return None
        # a read issued before this process's last write, or beside one committing, confirms nothing
        if asked >= mirror.written_at and not self._mirrors.is_committing(group_id):
            mirror.checked_at = max(mirror.checked_at, asked)
        return mirror

    async def _catch_up(self, group_id: str, mirror: GroupMirror, version: int) -> None:
        """Apply the rows stamped after the mirror's version: the three kinds in one statement."""
        async with self._catching_up.setdefault(group_id, asyncio.Lock()):
            if mirror.version >= version:
                return
            since = mirror.version
            found = await asyncio.gather(*(self._shared_read(DELTA[k], LOAD_COLUMNS[k], g=group_id, since=since) for k in KINDS))
            for kind, rows in zip(KINDS, found, strict=True):
                mirror.apply(kind, rows)
            mirror.version = max(mirror.version, version)  # rows newer than `version` are applied again later
        mirror.maintain_indexes(background=True)
        if self._mirrors is not None and not self._mirrors.evict():
            self._not_mirrored(group_id, "grew past")

    def observe_vector_cache_crowded(self, observer: Callable[[str], None]) -> None:
        """See ReportsCacheCrowding: `observer("mirror")` whenever a group is left unmirrored for its size."""
        self._crowded_observers.append(observer)

    def _not_mirrored(self, group_id: str, why: str) -> None:
        """A group too big for the mirror budget is answered by the server for MIRROR_TOO_BIG_S: every recall of it
        pays round trips no answer shows, so it is logged (once a period, as the marker lasts) and counted."""
        self._too_big[group_id] = time.monotonic() + MIRROR_TOO_BIG_S
        log.warning("group %s %s store.vector_cache_mb: not mirrored for %.0f s (the server answers its recalls)",
                    group_id, why, MIRROR_TOO_BIG_S)
        for observer in self._crowded_observers:
            observer("mirror")

    async def _loaded_within(self, group_id: str, timeout_s: float | None) -> GroupMirror | None:
        """Start loading the group's mirror (unless it is loading) and wait for it at most timeout_s."""
        if self._too_big.get(group_id, 0.0) > time.monotonic():
            return None
        task = self._mirror_loads.get(group_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load_mirror(group_id))
            self._mirror_loads[group_id] = task
            self._tasks.add(task)
            task.add_done_callback(lambda t: (self._tasks.discard(t), self._mirror_loads.pop(group_id, None)))
        await asyncio.wait({task}, timeout=timeout_s)  # never cancels the load
        return task.result() if task.done() and not task.cancelled() else None

    async def _load_mirror(self, group_id: str) -> GroupMirror | None:
        """Read the whole group into a new mirror: stamped rows a page (one record) at a time, then any rows
        written before versions existed, LOAD_FETCH a fetch. Pages are small enough that decoding one never
        holds the event loop long.

        The version is read first: rows written meanwhile are newer than it and read again by the next catch-up
        (a row updated while the pages pass is read at its new version, by a later page or the catch-up).
        """
        assert self._mirrors is not None
        budget = self._mirrors.budget

        def too_big() -> None:
            self._not_mirrored(group_id, "needs more than")

        try:
            rows = await self._read_rows(VERSION_QUERY, g=group_id)  # unconfirmed: this process may write while it loads
            mirror = GroupMirror(self.dim, rows[0]["e"], int(rows[0]["v"]))
            async with self._open_driver().session(database=self.database, default_access_mode=READ_ACCESS,
                                           fetch_size=LOAD_FETCH) as s:
                result = await s.run(Query(SIZES, timeout=LOAD_PAGE_TIMEOUT_S), {"g": group_id})
                sizes = await result.single(strict=True)
                if sum(sizes.values()) * self.dim * 4 > budget:  # the embeddings alone
                    return too_big()
                for kind in KINDS:
                    mirror.tables[kind].reserve(int(sizes[kind]))
                for kind in KINDS:
                    cols = LOAD_COLUMNS[kind]

                    async def page_after(ver: int, row_id: str, kind: str = kind) -> AsyncResult:
                        return await s.run(Query(PAGE[kind], timeout=LOAD_PAGE_TIMEOUT_S),
                                           {"g": group_id, "v": ver, "id": row_id, "k": LOAD_PAGE})

                    result = await page_after(-1, "")
                    while True:
                        page = (await result.single(strict=True))["rows"]
                        full = len(page) == LOAD_PAGE
                        if full:  # the server reads the next page while this one is applied
                            result = await page_after(page[-1][1], page[-1][0])  # after this (ver, id)
                        mirror.apply(kind, [dict(zip(cols, row, strict=True)) for row in page])
                        if mirror.nbytes > budget:
                            return too_big()
                        if not full:
                            break
                    result = await s.run(Query(UNSTAMPED[kind], timeout=LOAD_TIMEOUT_S), {"g": group_id})
                    batch: list[dict[str, Any]] = []
                    async for record in result:
                        batch.append(dict(record))
                        if len(batch) >= LOAD_FETCH:
                            mirror.apply(kind, batch)
                            batch = []
                            if mirror.nbytes > budget:
                                return too_big()
                    mirror.apply(kind, batch)
        except Exception as exc:  # noqa: BLE001 - a mirror is an optimisation: the server answers meanwhile
            log.warning("loading the mirror of group %s failed (the server answers meanwhile): %s", group_id, exc)
            return None
        if not self._mirrors.put(group_id, mirror):
            self._not_mirrored(group_id, "needs more than")
            return None
        mirror.maintain_indexes(background=True)
        return mirror

    async def preload(self, group_id: GroupId, *, wait_for_indexes: bool = True) -> bool:
        """Mirror the group now (benchmarks, tests, a service warming its busiest groups); True when it is held."""
        if self._mirrors is None:
            return False
        if group_id not in self._mirrors:
            await self._loaded_within(group_id, None)
        mirror = await self._mirror(group_id, confirm=True)
        if mirror is None:
            return False
        mirror.maintain_indexes(background=True)
        while wait_for_indexes and any(t.building for t in mirror.tables.values()):
            await asyncio.sleep(0.05)
        return True

    async def warm(self, max_groups: int, groups_prefix: str = "") -> list[GroupId]:
        """Mirror the most recently written groups (by their version node's time), until `max_groups` or until the
        mirrors fill nine tenths of store.vector_cache_mb; the groups mirrored. Their vector indexes build in
        the background. Once at start, off the request path."""
        if self._mirrors is None or max_groups <= 0:
            return []
        rows = await self._read_rows(RECENT_GROUPS, k=max_groups, prefix=groups_prefix)
        warmed: list[GroupId] = []
        for row in rows:
            if self._mirrors.held_bytes() >= 0.9 * self._mirrors.budget:
                break
            if await self.preload(GroupId(row["g"]), wait_for_indexes=False):
                warmed.append(GroupId(row["g"]))
        return warmed

    @contextlib.contextmanager
    def _committing(self, groups: Iterable[str]) -> Iterator[None]:
        """Around the commit of this process's write of `groups`: while it is on its way no mirror of them answers
        unconfirmed or is confirmed; after it, the next read of each group confirms its version first."""
        if self._mirrors is None:
            yield
            return
        marked = sorted(set(groups))
        for g in marked:
            self._mirrors.committing(g)
        try:
            yield
        finally:
            now = time.monotonic()
            for g in marked:
                self._mirrors.committed(g, now)

    async def _mirror_search(self, kind: str, group_id: GroupId, vector: Vector, k: int,
                             as_of: datetime | None = None) -> list[Hit] | None:
        """Nearest rows from the group's mirror; None when it is not mirrored (the caller asks the server)."""
        if k <= 0:
            return []
        mirror = await self._mirror(group_id, confirm=True)
        if mirror is None:
            return None
        valid = mirror.facts.valid_at_time(epoch_us(as_of)) if as_of is not None else None
        found = mirror.tables[kind].search(np.asarray(vector, dtype=np.float32), k, valid)
        return [Hit(i, s) for i, s in found]
