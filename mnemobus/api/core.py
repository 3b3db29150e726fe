"""What the memory service does, once, whatever the transport.

HTTP (`http.py`), NATS (`nats_service.py`) and the `/memory` commands
(`commands.py`) are thin adapters over `MemoryService`; each maps the two
refusals here onto its own wire: `InvalidMessage` (the caller must change
the request: HTTP 422) and `NotFound` (HTTP 404).
"""

from __future__ import annotations

import contextlib
import logging
import uuid as uuidlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from mnemobus.shared import subjects
from mnemobus.engine.recall import MAX_GROUPS, checked_groups
from mnemobus.shared.limits import query_tail
from mnemobus.shared.envelope import EpisodeMessage
from mnemobus.shared.errors import InvalidMessage, MnemobusError
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import DeleteCounts, FactHop, GraphStore
from mnemobus.store.model import Entity, Episode, Fact, GroupExport, RecallQuery, ScoredEpisode, ScoredFact, episode_id_for

#: one item of a search: a fact or a source message, with its score
Recalled = ScoredFact | ScoredEpisode

from mnemobus.api.models import Message
from mnemobus.shared.config import ApiSettings

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime

log = logging.getLogger("mnemobus.api")


class NotFound(MnemobusError):
    """The named fact, entity or episode does not exist (in any group the caller may see)."""


class Forbidden(MnemobusError):
    """The caller is known but may not do this (only admins from users.yaml may delete users' memory)."""


def _one_group(group_id: str) -> GroupId:
    return checked_groups([group_id])[0]


def message_query(messages: Sequence[Message]) -> str:
    """Graphiti's get-memory query: the messages joined; we keep the newest end when it is too long."""
    text = "\n".join(f"{m.role or m.role_type}: {m.content}" for m in messages)
    return query_tail(text)


total = DeleteCounts.total


class GroupLocks:
    """One lock per group, held by a group's deletion and the writes that read back what they wrote, so a write
    racing a deletion comes entirely before or after it (it was a 500: the write's own row gone on reading back).
    A lock lives while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[anyio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, group: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(group, (None, 0))
        lock = lock or anyio.Lock()
        self._locks[group] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            users = self._locks[group][1] - 1
            if users:
                self._locks[group] = (lock, users)
            else:
                del self._locks[group]


@dataclass
class MemoryService:
    """One service over the runtime's engine and bus; every public coroutine is an API operation."""

    rt: "Runtime"
    config: ApiSettings
    groups: GroupLocks = field(default_factory=GroupLocks)

    @classmethod
    def of(cls, rt: "Runtime", config: ApiSettings | None = None) -> "MemoryService":
        return cls(rt, config or rt.settings.api)

    @property
    def store(self) -> Any:
        return self.rt.engine.store

    @property
    def trusts_claims(self) -> bool:
        """Whether the identity a request names (its source, an `actor`) can be believed: every caller showed the
        API key, or the bus lets only trusted roles publish here. On an open service it is only a claim."""
        return self.config.api_key is not None or self.rt.settings.nats.permissions_enforced

    # -- health and status ------------------------------------------------------------------

    async def health(self) -> tuple[bool, str]:
        """Healthy means the store answers a trivial query, not just that the process is up."""
        try:
            with anyio.fail_after(2):
                await self.store.ping()
        except Exception as exc:
            return False, f"{type(exc).__name__}: {exc}"
        return True, "ok"

    def status(self) -> dict[str, Any] | None:
        from mnemobus.kernel import extensions

        return extensions.status_document(self.rt)

    # -- ingestion --------------------------------------------------------------------------

    def episode_for(self, group: GroupId, m: Message) -> EpisodeMessage:
        """A Graphiti message as our episode; its uuid, when given, is the idempotency key within the group."""
        source_id = m.uuid or uuidlib.uuid4().hex
        return EpisodeMessage(episode_id=episode_id_for(group, source_id, m.role_type), group_id=group,
                              role=m.role_type, content=m.content, source_message_id=source_id,
                              reference_time=m.timestamp, platform=m.source_description or "graphiti-api",
                              user_id=m.role or None, speaker_name=m.role[:256] if m.role else None,
                              episode_name=m.name)

    async def add_messages(self, group_id: str, messages: Sequence[Message]) -> list[str]:
        """Validate everything first, then publish each message to the durable episode stream.

        Nothing is accepted that the worker would refuse: a bad group id or an
        oversized message is refused here, before any of the batch is queued.
        """
        group = _one_group(group_id)
        wires = [self.episode_for(group, m) for m in messages]
        datas = [w.to_wire() for w in wires]
        limit = self.rt.settings.nats.max_message_bytes
        for i, data in enumerate(datas):
            if len(data) > limit:
                raise InvalidMessage("payload_too_large",
                                     f"messages.{i}: {len(data)} bytes as an episode; the limit is {limit}")
        for w, data in zip(wires, datas):
            await self.rt.bus.js_publish(subjects.episode(group), data, msg_id=w.episode_id)
        return [w.episode_id for w in wires]

    # -- reads ------------------------------------------------------------------------------

    async def all_groups(self) -> list[GroupId]:
        return list(await self.store.group_ids())

    async def search(self, group_ids: Sequence[str] | None, query: str, limit: int, as_of: datetime | None = None,
                     *, episodes: bool = True) -> list[Recalled]:
        """Facts and the messages they came from in one ranking, best first: what every door returns.

        `episodes=False` asks for facts alone. No group ids means every group, up to the limit of groups."""
        groups = checked_groups(group_ids) if group_ids else None
        if groups is None:
            everything = await self.all_groups()
            if len(everything) > MAX_GROUPS:
                raise InvalidMessage("too_many_groups", f"the store holds {len(everything)} groups; a search "
                                     f"without group_ids covers at most {MAX_GROUPS}: name the groups")
            groups = tuple(everything)
        with anyio.fail_after(self.config.search_timeout_s):
            result = await self.rt.engine.recall(RecallQuery(text=query, group_ids=groups, as_of=as_of,
                                                             max_facts=limit, max_episodes=limit if episodes else 0,
                                                             max_items=limit))
            return await self.with_ends(result.ranked(limit), as_of or datetime.now(UTC))

    async def with_ends(self, items: Sequence[Recalled], as_of: datetime) -> list[Recalled]:
        """The messages among the results marked ended when every fact drawn from them had ended by `as_of`: "I
        live in London now", said before "I moved to Paris", is no current fact for a Graphiti client."""
        by_group: dict[GroupId, list[str]] = {}
        for i in items:
            if isinstance(i, ScoredEpisode):
                by_group.setdefault(i.episode.group_id, []).append(i.episode.id)
        if not by_group:
            return list(items)

        async def every_group(view: GraphStore, _: None) -> list[list[Fact]]:
            # one run, not a read per group: on SQLite one thread hop and one snapshot for all of them; on a
            # networked store the groups' round trips side by side
            return await view.gather([lambda g=g, ids=ids: view.episode_facts(g, ids) for g, ids in by_group.items()])

        drawn: dict[str, list[Fact]] = {}
        for found in await self.store.run_reads(every_group, lambda: None):
            for f in found:
                for episode_id in f.episode_ids[:1]:  # the message it was first drawn from, not a confirmation
                    drawn.setdefault(episode_id, []).append(f)
        out: list[Recalled] = []
        for i in items:
            facts = drawn.get(i.episode.id, []) if isinstance(i, ScoredEpisode) else []
            if facts and all(f.invalid_at is not None and f.invalid_at <= as_of for f in facts):
                i = replace(i, ended_at=max(f.invalid_at for f in facts if f.invalid_at is not None),
                            expired_at=max((f.expired_at for f in facts if f.expired_at is not None), default=None))
            out.append(i)
        return out

    async def episodes(self, group_id: str, last_n: int) -> list[Episode]:
        return await self.rt.engine.episodes(_one_group(group_id), last_n)

    async def locate_fact(self, fact_id: str) -> Fact:
        """A fact by id alone, as Graphiti's /entity-edge/{uuid} asks; ids are unique across groups."""
        for group in await self.all_groups():
            found = await self.store.get_facts(group, [fact_id])
            if found:
                return found[0]
        raise NotFound(f"no fact with uuid {fact_id!r}")

    async def locate_edge(self, uuid: str) -> Fact | Recalled:
        """What /entity-edge/{uuid} names: a fact, or a message a search returned in a fact's shape."""
        try:
            return await self.locate_fact(uuid)
        except NotFound:
            episode = await self.locate_episode(uuid)
        (marked,) = await self.with_ends([ScoredEpisode(episode, 0.0)], datetime.now(UTC))
        return marked

    async def locate_episode(self, episode_id: str) -> Episode:
        for group in await self.all_groups():
            found = await self.store.get_episode(group, episode_id)
            if found is not None:
                return found
        raise NotFound(f"no episode with uuid {episode_id!r}")

    async def entity(self, group_id: str, entity_id: str) -> Entity:
        found = await self.store.get_entities(_one_group(group_id), [entity_id])
        if not found:
            raise NotFound(f"no entity with uuid {entity_id!r} in group {group_id!r}")
        return found[0]

    async def search_entities(self, group_id: str, query: str, limit: int) -> list[Entity]:
        return [se.entity for se in await self.rt.engine.search_entities(_one_group(group_id), query, limit)]

    async def traverse(self, group_id: str, entity: str, *, relations: Sequence[str] | None, max_hops: int,
                       limit: int, as_of: datetime | None) -> list[FactHop]:
        return await self.rt.engine.graph_traverse(_one_group(group_id), entity, relations=relations,
                                                   max_hops=max_hops, limit=limit, as_of=as_of)

    async def facts_as_of(self, group_id: str, as_of: datetime, limit: int) -> list[Fact]:
        return await self.rt.engine.facts_as_of(_one_group(group_id), as_of, limit)

    async def group_export(self, group_id: str) -> GroupExport:
        """Every row of a group (the graph page draws it); NotFound when the group holds nothing."""
        group = _one_group(group_id)
        dump: GroupExport = await self.store.export_group(group)
        if not (dump.episodes or dump.entities or dump.facts):
            raise NotFound(f"group {group_id!r} holds nothing")
        return dump

    async def history(self, group_id: str, entity: str, relation: str | None) -> list[Fact]:
        return await self.rt.engine.edge_history(_one_group(group_id), entity, relation)

    async def active_facts(self, groups: Sequence[GroupId], limit: int = 50) -> list[Fact]:
        """What the memory holds as true now, across the groups, newest first."""
        now = datetime.now(UTC)
        facts: list[Fact] = []
        for group in groups:
            facts.extend(await self.store.facts_valid_at(group, now, limit))
        facts.sort(key=lambda f: f.created_at, reverse=True)
        return facts[:limit]

    # -- deletes ----------------------------------------------------------------------------

    async def delete_fact(self, fact_id: str) -> DeleteCounts:
        """Graphiti's DELETE /entity-edge: the fact is gone (a second delete is a 404); a fact it had ended is
        valid again, since what ended it was this one. Its history before that stays in the facts it superseded."""
        fact = await self.locate_fact(fact_id)
        counts = await self.store.delete_fact(fact.group_id, fact.id)
        if not counts.facts:
            raise NotFound(f"no fact with uuid {fact_id!r}")
        return counts

    async def add_entity(self, group_id: str, entity_id: str, name: str, summary: str) -> Entity:
        async with self.groups.hold(_one_group(group_id)):
            return await self.rt.engine.add_entity(group_id, entity_id, name, summary)

    async def purge_queued(self, group: GroupId | None) -> None:
        """Drop the group's episodes (and dead letters) still on the bus, so nothing deleted comes back."""
        for stream, subject in ((subjects.EPISODE_STREAM, subjects.episode(group) if group else None),
                                (subjects.DLQ_STREAM, subjects.dlq(group) if group else None)):
            await self.rt.bus.js.purge_stream(stream, subject=subject)

    async def delete_group(self, group_id: str) -> DeleteCounts:
        """Every episode, entity, fact, link and embedding of the group, and its queued episodes."""
        return await self.delete_groups([_one_group(group_id)])

    async def delete_groups(self, groups: Sequence[GroupId]) -> DeleteCounts:
        """The groups from the store (all or none where it can: `GraphStore.delete_groups`), and their queued
        episodes and dead letters.

        The store goes first: when it fails (a full disk) nothing queued is lost with it. The groups are deleted
        once more after the purge, for what the worker stored from the queue in between."""
        async with contextlib.AsyncExitStack() as held:
            for group in sorted(set(groups)):  # one order for every caller: two deletions never wait on each other
                await held.enter_async_context(self.groups.hold(group))
            first = await self.store.delete_groups(groups)
            for group in groups:
                await self.purge_queued(group)
            return total([first, await self.store.delete_groups(groups)])

    async def delete_episode(self, episode_id: str) -> DeleteCounts:
        episode = await self.locate_episode(episode_id)
        return await self.store.delete_episode(episode.group_id, episode.id)

    async def clear(self) -> DeleteCounts:
        """Graphiti's POST /clear: every group (all or none where the store can), and everything still queued."""
        first = await self.store.delete_groups(await self.all_groups())
        await self.purge_queued(None)
        return total([first, await self.store.delete_groups(await self.all_groups())])
