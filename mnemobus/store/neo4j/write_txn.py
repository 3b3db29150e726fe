"""One write transaction of the engine on Neo4j: writes queued and sent as one statement, reads answered in process."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
import numpy as np

from neo4j import AsyncSession, AsyncTransaction
from neo4j import exceptions as nx

from mnemobus.shared.errors import StoreIntegrityError, episode_id_taken
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import Prefetch, Vector, in_narrowed_chain, pick_by_type
from mnemobus.store.model import Entity, Episode, Fact
from mnemobus.store.erasures import GroupErased
from mnemobus.store.neo4j.deadlocks import (GAVE_UP, REPLAYED, VersionNodeErased, is_deadlock, pause_before_try,
                                            timed_out, timeout_failure)
from mnemobus.store.neo4j.erasure import HOLD_ERASURES
from mnemobus.store.neo4j.mirror import GroupMirror
from mnemobus.store.neo4j.overlay import Overlay, Pending
from mnemobus.store.neo4j.cypher import (CHAIN_QUERY, ENTITY_MAP, EPISODES_SAYING, FLUSH_WRITES,
                                         LOCK_EXISTING_GROUPS, LOCK_GROUPS, PREFETCH)
from mnemobus.store.neo4j.rows import (as_float_list, cosine_score, entity_from_row, entity_params, episode_params,
                                       fact_from_row, fact_params, group_key, lucene_phrase, record_dicts,
                                       seen_order, utc_or_none)
from mnemobus.store.neo4j.tuning import EXACT_SCAN_MAX, LOCK_RETRIES

log = logging.getLogger("mnemobus.store.neo4j.store")  # one log for the whole store


def _version(row: dict[str, Any]) -> tuple[str | None, int]:
    """A group lock's (epoch, version); a version node this transaction created is not committed, so others read
    the group as versionless. A null version: an erasure deleted the node while the lock was waited for."""
    if row["fresh"]:
        return None, 0
    if row["v"] is None:
        raise VersionNodeErased(row["g"])
    return row["e"], int(row["v"])


class SplitBatch(Exception):
    """A failed work of a batch had rows already sent: the batch is rolled back and its works run one by one."""


class Neo4jWriteTxn:
    """The WriteTxn of the contract over one explicit Neo4j transaction.

    Why it buffers: each Bolt round trip costs ~1-2 ms on loopback and far more across a network, and
    the engine makes a dozen write calls per episode. Writes are queued and sent as one UNWIND statement
    (`FLUSH_WRITES`) when the transaction commits. Reads lock their group first (see LOCK_GROUPS), read the
    server once per key and answer from then on in process, with the queued writes applied (see
    overlay.py): a read never flushes. A batch's likely reads come in one statement up front
    (`prefetch`). Errors a write would have raised at once (unknown entity, duplicate id) are raised at
    the flush instead, always before commit, so the episode is still all-or-nothing. `flushes` counts the
    statements that wrote: a batch (`Neo4jStore.run_transactions`) can drop a failed work's queued rows
    only while none of them was sent.

    A statement the server fails as a deadlock's victim is not the caller's failure: given the session
    (`again`), the transaction is rolled back and every statement it sent is sent again in a new one, then
    the failed one (`_replay`), invisibly to the caller, whose code cannot be run twice.
    """

    def __init__(self, tx: AsyncTransaction,
                 with_pending: Callable[[str, list[Fact]], list[Fact]] = lambda g, facts: facts,
                 mirror_of: Callable[[str, tuple[str | None, int] | None, bool], Awaitable[GroupMirror | None]] | None = None,
                 again: AsyncSession | None = None, on_deadlock: Callable[[str], None] = lambda outcome: None,
                 timeout_s: float | None = None) -> None:
        self._tx = tx
        self._timeout_s = timeout_s  # the server-side bound of each try (a replay's new transaction too)
        self._again = again  # the session to begin a deadlock victim's next try in
        self._on_deadlock = on_deadlock
        self._said: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = []  # statements sent, and their answers
        self._from_mirror: set[str] = set()  # groups some answer came from this process's mirror of
        self._with_pending = with_pending  # retrieval counts the store holds but has not written yet
        self._mirror_of = mirror_of  # the group's committed entity vectors, when the store mirrors it
        self._own_vectors: list[tuple[str, str, np.ndarray]] = []  # (group, entity id, vector) written here
        self._p = Pending()
        self._view = Overlay()
        self._locked: set[str] = set()
        self._erasures: dict[str, int] = {}  # group -> erasure count read under its lock (check_not_erased)
        self.versions: dict[str, tuple[str | None, int]] = {}  # group -> committed (epoch, version) when locked
        self.round_trips = 0
        self.flushes = 0
        self.broken = False
        self.groups: set[str] = set()  # groups written: their mirrors are stale once this commits

    @property
    def tx(self) -> AsyncTransaction:
        """The server transaction: a new one after a replay."""
        return self._tx

    async def _run(self, query: str, **params: Any) -> list[dict[str, Any]]:
        self.round_trips += 1
        try:
            rows = await self._sent_or_replayed(query, params)
        except nx.ClientError as exc:  # a batch must fail whole here, not split into works that each wait again
            self.broken = True
            if not timed_out(exc):
                raise
            raise timeout_failure(exc, self._timeout_s) from exc
        except BaseException:
            self.broken = True  # the server fails the whole transaction with the statement
            raise
        self._said.append((query, params, rows))
        return rows

    async def _sent_or_replayed(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            return await self._send(query, params)
        except nx.TransientError as exc:
            if self._again is None or not is_deadlock(exc):
                raise
            return await self._replay(exc, query, params)

    async def _send(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return await record_dicts(await self._tx.run(query, params))

    async def _replay(self, lost: nx.TransientError, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The answer to `query` in a new transaction that first sent again all this one had sent.

        Why it is safe: the caller's code decided what to write from the answers it was given, so the replay is
        what that code would do now if every statement answers as it did before (compared; a replayed write
        answers what it matched), which `_same` checks; if one does not (the deadlock's winner changed what this
        transaction had read), the deadlock is raised, the store's error says "retry" and nothing is stored.
        Rows written twice are not a risk: the first try was rolled back with all it wrote.
        """
        assert self._again is not None
        log.warning("a write transaction lost a deadlock to another writer after %d statement(s); sending them "
                    "again in a new transaction", len(self._said))
        for n in range(LOCK_RETRIES):
            try:
                await self._tx.rollback()
            except (nx.Neo4jError, nx.DriverError):
                pass  # the server had ended it with the deadlock already
            await pause_before_try(n)
            try:
                self._tx = await self._again.begin_transaction(timeout=self._timeout_s)
                same = True
                for q, p, said in self._said:
                    if not self._same(q, await self._send(q, p), said):
                        same = False
                        break
                rows = await self._send(query, params) if same else []
            except nx.TransientError as exc:
                if not is_deadlock(exc):
                    raise
                lost = exc
                continue
            except nx.ConstraintError:  # a row it had written is another writer's now
                same = False
            if not same:
                log.warning("a write transaction that lost a deadlock reads differently now: not replayed, "
                            "the caller retries")
                self._on_deadlock(GAVE_UP)
                raise lost
            self._on_deadlock(REPLAYED)
            log.info("a write transaction that lost a deadlock was replayed (try %d)", n + 2)
            return rows
        self._on_deadlock(GAVE_UP)
        raise lost

    def _same(self, query: str, got: list[dict[str, Any]], said: list[dict[str, Any]]) -> bool:
        """Whether a replayed statement answered as before. A group lock answers the group's version, which the
        deadlock's winner moved if it wrote the group: the same groups must be locked (none created or gone
        meanwhile), and a group this transaction read from a mirror must be at the version it was read at (the
        mirror's answer was not a statement, so it cannot be compared)."""
        if query not in (LOCK_GROUPS, LOCK_EXISTING_GROUPS):
            return got == said
        if [r["g"] for r in got] != [r["g"] for r in said]:
            return False
        now = {r["g"]: _version(r) for r in got}
        if any(now[g] != self.versions.get(g) for g in now if g in self._from_mirror):
            return False
        self.versions.update(now)
        return True

    async def lock(self, groups: Iterable[str], *, create: bool = True) -> None:
        """Take the write locks of these groups (sorted), held until the transaction ends."""
        new = sorted(set(groups) - self._locked)
        if not new:
            return
        rows = await self._run(LOCK_GROUPS if create else LOCK_EXISTING_GROUPS, groups=new)
        self._locked.update(new)
        self.versions.update((r["g"], _version(r)) for r in rows)

    async def check_not_erased(self, group_id: GroupId, seen: int) -> None:
        """The group's version lock, then its erasure count under that count's lock (erasure.py): once read here,
        no erasure of the group commits before this transaction ends. The version locks come first, as an erasure
        takes them, so the two never wait on each other in a circle."""
        if group_id not in self._erasures:
            await self.lock([group_id])
            # every group this transaction holds at once (a batch's prefetch locked them all): one round trip
            groups = sorted(g for g in self._locked if g not in self._erasures)
            self._erasures.update((r["g"], int(r["n"])) for r in await self._run(HOLD_ERASURES, gs=groups))
        if self._erasures[group_id] != seen:
            raise GroupErased(group_id)

    async def prefetch(self, ahead: Prefetch) -> None:
        """Lock the batch's groups, then read what its works will ask for first, in one statement.

        Nearest entities are read for the groups this process holds no current mirror of (the mirror
        answers the others with no round trip)."""
        await self.lock(ahead.groups())
        mirrored = set()
        if self._mirror_of is not None:
            for g in {g for g, _, _ in ahead.similar}:
                if await self._mirror_of(g, self.versions.get(g), False) is not None:
                    mirrored.add(g)
        self._from_mirror.update(mirrored)
        await self._read_ahead(replace(ahead, similar=tuple(s for s in ahead.similar if s[0] not in mirrored)))

    async def _read_ahead(self, ahead: Prefetch) -> None:
        """Read what `ahead` names into the overlay, in one statement."""
        if not (ahead.episodes or ahead.aliases or ahead.chains or ahead.similar):
            return
        (got,) = await self._run(
            PREFETCH, eps=[e for _, e in ahead.episodes], aliases=[list(k) for k in ahead.aliases],
            chains=[list(c) for c in ahead.chains], sim_groups=sorted({g for g, _, _ in ahead.similar}),
            similar=[{"i": i, "g": g, "k": key, "v": as_float_list(v)} for i, (g, key, v) in enumerate(ahead.similar)],
            sim_k=int(ahead.similar_k), scan_max=EXACT_SCAN_MAX)
        for i, near in got["similar"]:
            g, _, vector = ahead.similar[i]
            for n in near:
                self._view.remember_entity(n["e"])
            self._view.remember_similar(g, vector, ahead.similar_k, {n["e"]["id"]: cosine_score(n["s"]) for n in near})
        for episode_id, stored_in in got["eps"]:
            self._view.remember_episode(episode_id, stored_in)
        for g, key, owners in got["aliases"]:
            self._view.remember_alias(g, key, [(t, entity) for t, entity in owners])
        for g, subject_id, relation, subject_name, facts in got["chains"]:
            self._view.remember_chain(g, subject_id, relation, [(f["r"], subject_name, f["on"]) for f in facts])

    def mark(self) -> tuple[int, tuple[int, ...], int]:
        """Where the queue stands (see `rewind`)."""
        return self.flushes, self._p.mark(), len(self._own_vectors)

    def rewind(self, mark: tuple[int, tuple[int, ...], int]) -> bool:
        """Drop what was queued since `mark`; False when some of it was already sent (nothing is dropped then)."""
        if self.flushes != mark[0] or self.broken:
            return False
        self._p.truncate(mark[1])
        del self._own_vectors[mark[2]:]
        return True

    async def flush(self) -> None:
        """Send every queued write in one statement; raise StoreIntegrityError naming what was refused."""
        p, self._p = self._p, Pending()
        if not p:
            return
        groups = p.groups()
        self.groups.update(groups)
        self._locked.update(groups)  # the statement's version bump locks them
        self.flushes += 1
        self._view.clear()  # the server's rows are newer than those read
        try:
            rows = await self._run(FLUSH_WRITES, groups=groups, eps=p.eps, ents=p.ents, obs=p.obs, links=p.links,
                                   facts=p.facts, upds=p.upds, srcs=p.srcs)
        except nx.ConstraintError as exc:
            raise StoreIntegrityError(f"Neo4j refused the write: {exc.message}") from exc
        got = rows[0]
        missing_obs = [o for o in p.obs if o["id"] not in set(got["obs_hit"])]
        if missing_obs:
            o = missing_obs[0]
            raise StoreIntegrityError(f"entity {o['id']} is not in group {o['g']}")
        hit = set(got["fact_hit"])
        for f in p.facts:
            if f["id"] not in hit:
                raise StoreIntegrityError(
                    f"fact {f['id']!r}: subject {f['subject_id']!r} or object {f['object_id']!r} "
                    f"is not an entity of group {f['group_id']!r}"
                )
        hit = set(got["upd_hit"])
        for u in p.upds:
            if u["id"] not in hit:
                raise StoreIntegrityError(f"fact {u['id']} is not in group {u['g']}")

    async def insert_episode(self, episode: Episode, *, screened: bool, embedding: Vector | None) -> bool:
        """One read (is the id stored?) unless prefetched; the row itself is queued like every other write.

        The group's lock makes a second writer of the same id wait and then see it stored; a writer of
        another group racing for the same id fails on the id's unique constraint: never two episodes.
        """
        if episode.id in self._p.episode_ids:
            return False
        await self.lock([episode.group_id], create=False)
        known, stored_in = self._view.stored_episode_group(episode.id)
        if not known:
            rows = await self._run("MATCH (n:Episode {id: $id}) RETURN n.group_id AS g", id=episode.id)
            stored_in = rows[0]["g"] if rows else None
            self._view.remember_episode(episode.id, stored_in)
        if stored_in is not None:
            if stored_in != episode.group_id:
                raise episode_id_taken(episode.id, episode.group_id, stored_in)
            return False
        p = episode_params(episode, screened, embedding)
        self._p.eps.append({k: v for k, v in p.items() if v is not None})
        self._p.episode_ids.add(episode.id)
        return True

    async def _entities_now(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        """The entities' rows after the flush (read from the server once each); missing ones left out."""
        wanted = list(dict.fromkeys(ids))
        unknown = [eid for eid in wanted if not self._view.entity_known(self._p, eid)]
        if unknown:
            for r in await self._run(f"UNWIND $ids AS id MATCH (e:Entity {{id: id}}) RETURN {ENTITY_MAP} AS e", ids=unknown):
                self._view.remember_entity(r["e"])
        aliases = self._view.unknown_aliases(self._p, wanted)
        if aliases:  # who owns the aliases queued observations add decides whether the entity gets them
            await self._read_ahead(Prefetch(aliases=tuple(aliases)))  # type: ignore[arg-type]
        return [row for eid in wanted if (row := self._view.entity(self._p, eid)) is not None]

    async def entity_by_alias(self, group_id: GroupId, alias: str, types: Sequence[str] | None = None) -> Entity | None:
        await self.lock([group_id], create=False)
        if not self._view.alias_known(group_id, alias):
            await self._read_ahead(Prefetch(aliases=((group_id, alias),)))
        owners = self._view.owners(self._p, group_id, alias)  # type -> entity id, after the flush
        rows = {r["id"]: r for r in await self._entities_now(owners.values())}
        found = [(t, rows[eid]) for t, eid in owners.items() if eid in rows and (types is None or t in types)]
        if not found:
            return None
        found.sort(key=lambda tr: seen_order(tr[1]))  # as the server orders them: first_seen, then id
        return entity_from_row(pick_by_type(found, types))

    async def similar_entities(self, group_id: GroupId, vector: Vector, k: int, *,
                               min_similarity: float | None = None) -> list[tuple[Entity, float]]:
        """Scored from the group's mirror when the store holds it, else by the server; the entities this
        transaction wrote are scored here too, and every row comes with the queued writes applied.

        Why the mirror: the server's exact scan reads every entity's embedding (~30 us a row: 0.75 s
        at 25k entities), once per new name an episode mentions. The mirror holds what is committed,
        and under the group's lock that is current.
        """
        if k <= 0:
            return []
        await self.lock([group_id], create=False)
        q = np.asarray(vector, dtype=np.float32)
        known = self.versions.get(group_id)
        mirror = await self._mirror_of(group_id, known, False) if self._mirror_of is not None else None
        read_ahead = self._view.similar(group_id, q, k) if mirror is None else None
        if read_ahead is None and mirror is None and self._mirror_of is not None:
            mirror = await self._mirror_of(group_id, known, True)  # not held: load it, waiting a moment
        if read_ahead is not None:
            scores = read_ahead
        elif mirror is not None:
            self._from_mirror.add(group_id)
            scores = dict(mirror.tables["entity"].search(q, k))
        else:
            scores = await self._similar_on_server(group_id, vector, k)
        scores.update((eid, float(v @ q)) for g, eid, v in self._own_vectors if g == group_id)
        best = [(eid, score) for eid, score in sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k]
                if min_similarity is None or score >= min_similarity]
        if not best:
            return []
        rows = {r["id"]: r for r in await self._entities_now(eid for eid, _ in best)}
        return [(entity_from_row(rows[eid]), score) for eid, score in best if eid in rows]

    async def _similar_on_server(self, group_id: GroupId, vector: Vector, k: int) -> dict[str, float]:
        rows = await self._run(
            "MATCH (e:Entity {group_id: $g}) WHERE e.embedding IS NOT NULL "
            "WITH e, vector.similarity.cosine(e.embedding, $v) AS s ORDER BY s DESC, e.id LIMIT $k "
            f"RETURN {ENTITY_MAP} AS e, s",
            g=group_id, v=as_float_list(vector), k=int(k),
        )
        for r in rows:
            self._view.remember_entity(r["e"])
        return {r["e"]["id"]: cosine_score(r["s"]) for r in rows}

    async def insert_entity(self, entity: Entity, embedding: Vector | None) -> None:
        p = {k: v for k, v in entity_params(entity, embedding).items() if v is not None}
        if any(self._p.claims_alias(entity.group_id, a) for a in p["aliases"]):
            await self.flush()  # the flush creates entities before observations: keep the order they were made in
        self._p.add_entity(p)
        if embedding is not None:
            self._own_vectors.append((entity.group_id, entity.id, np.asarray(embedding, dtype=np.float32)))

    async def observe_entity(
        self, group_id: GroupId, entity_id: str, *, name: str, alias: str, seen: datetime
    ) -> None:
        # an alias already owned by another entity stays with it (first writer wins, as in the embedded store)
        self._p.add_observation({"id": entity_id, "g": group_id, "name": name, "alias": alias, "seen": utc_or_none(seen)})

    async def link_episode_entity(self, group_id: GroupId, episode_id: str, entity_id: str) -> None:
        self._p.links.append({"ep": episode_id, "en": entity_id, "g": group_id})

    async def episodes_saying(self, group_id: GroupId, name: str, limit: int) -> list[tuple[str, str]]:
        """From the server's full-text index: what it holds is committed, so the episodes this transaction queued
        are not among them (their own names were looked up as they were written)."""
        if not name.strip() or limit <= 0:
            return []
        await self.lock([group_id], create=False)
        rows = await self._run(EPISODES_SAYING, q=f"+gk:{group_key(group_id)} +content:{lucene_phrase(name)}",
                               g=group_id, k=int(limit))
        return [(r["id"], r["content"]) for r in rows]

    async def facts_between(self, group_id: GroupId, subject_id: str, relation: str, *,
                            objects: Sequence[str] | None = None, held_after: datetime | None = None) -> list[Fact]:
        """The chain from this transaction's view (read once, then kept with its own writes), narrowed after: the
        view holds it whole for the transaction's later facts."""
        await self.lock([group_id], create=False)
        if not self._view.chain_known(group_id, subject_id, relation) and subject_id in self._p.ent_by_id:
            self._view.remember_chain(group_id, subject_id, relation, [])  # created here: nothing stored names it
        if not self._view.chain_known(group_id, subject_id, relation):
            rows = await self._run(CHAIN_QUERY, g=group_id, s=subject_id, rel=relation)
            self._view.remember_chain(group_id, subject_id, relation, [(x["r"], x["sn"], x["on"]) for x in rows])
        chain = self._view.chain(self._p, group_id, subject_id, relation)
        facts = self._with_pending(group_id, [fact_from_row(r, sn, on) for r, sn, on in chain])
        if objects is None and held_after is None:
            return facts
        return [f for f in facts if in_narrowed_chain(f, objects or (), held_after)]

    async def insert_fact(self, fact: Fact, embedding: Vector | None) -> None:
        self._p.facts.append({k: v for k, v in fact_params(fact, embedding).items() if v is not None})

    async def update_fact(self, fact: Fact) -> None:
        self._p.upds.append({
            "id": fact.id, "g": fact.group_id, "confidence": float(fact.confidence), "last_seen": utc_or_none(fact.last_seen),
            "valid_at": utc_or_none(fact.valid_at), "invalid_at": utc_or_none(fact.invalid_at), "expired_at": utc_or_none(fact.expired_at),
            "superseded_by": fact.superseded_by,
        })

    async def add_fact_source(self, group_id: GroupId, fact_id: str, episode_id: str, source_message_id: str) -> None:
        if (fact_id, episode_id) in self._p.src_keys:
            return  # already queued: the statement checks stored provenance, not its own earlier rows
        self._p.src_keys.add((fact_id, episode_id))
        self._p.srcs.append({"id": fact_id, "g": group_id, "ep": episode_id, "sm": source_message_id})


