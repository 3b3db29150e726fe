"""What a Neo4j write transaction reads, answered in process: the rows it read once, plus its queued writes.

Why: a transaction took a Bolt round trip per read the engine made (an episode's id, each name, each
fact chain), and a read that could see queued writes sent them first and read again: ~8 round trips
an episode. A write transaction now holds its groups' locks (their GroupVersion nodes) from before
its first read until it commits, so no other writer changes those groups meanwhile: a row read once
stays what the server holds, and the server's answer after a flush is that row with the queued
writes applied in the order the flush statement applies them. That is what this module computes,
so reads never flush, and a batch's reads can be fetched up front in one statement.

Rows are the dicts the queries return (times as epoch microseconds) or the parameters queued for
the flush (times as datetimes); `as_datetime` reads both.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Row = dict[str, Any]


def as_datetime(v: Any) -> datetime | None:
    """A stored time as an aware datetime: epoch microseconds (projections), a driver DateTime or a datetime."""
    if v is None:
        return None
    if isinstance(v, int):
        return EPOCH + timedelta(microseconds=v)
    if hasattr(v, "to_native"):
        v = v.to_native()
    if isinstance(v, datetime) and v.tzinfo is None:
        v = v.replace(tzinfo=UTC)
    return v


class Pending:
    """Writes queued since the last flush, and what they could change for a read in the same transaction."""

    def __init__(self) -> None:
        self.eps: list[Row] = []
        self.ents: list[Row] = []
        self.obs: list[Row] = []
        self.links: list[Row] = []
        self.facts: list[Row] = []
        self.upds: list[Row] = []
        self.srcs: list[Row] = []
        self.episode_ids: set[str] = set()  # queued episodes: a second insert of one is not a new episode
        self.src_keys: set[tuple[str, str]] = set()
        # indexes over ents and obs, so an answer costs no scan of the queue (a batch queues hundreds)
        self.ent_by_id: dict[str, Row] = {}
        # (group, alias) -> {type: first queued entity of that type naming it}: an alias names one entity a type
        self.ent_claims: dict[tuple[str, str], dict[str, str]] = {}
        self.obs_claims: dict[tuple[str, str], list[str]] = {}  # (group, alias) -> observed entities, in order
        self.obs_of: dict[str, list[Row]] = {}  # entity id -> its observations, in order

    def add_entity(self, row: Row) -> None:
        self.ents.append(row)
        self._index_entity(row)

    def _index_entity(self, row: Row) -> None:
        self.ent_by_id.setdefault(row["id"], row)
        for key in row["aliases"]:
            self.ent_claims.setdefault((row["group_id"], key), {}).setdefault(row.get("type") or "thing", row["id"])

    def add_observation(self, row: Row) -> None:
        self.obs.append(row)
        self._index_observation(row)

    def _index_observation(self, row: Row) -> None:
        self.obs_claims.setdefault((row["g"], row["alias"]), []).append(row["id"])
        self.obs_of.setdefault(row["id"], []).append(row)

    def _lists(self) -> tuple[list[Row], ...]:
        return self.eps, self.ents, self.obs, self.links, self.facts, self.upds, self.srcs

    def __bool__(self) -> bool:
        return any(self._lists())

    def groups(self) -> list[str]:
        """Every group a flush of these rows writes, sorted: the order its version nodes are locked in."""
        found = {r["group_id"] for r in (*self.eps, *self.ents, *self.facts)}
        found.update(r["g"] for r in (*self.obs, *self.links, *self.upds, *self.srcs))
        return sorted(found)

    def mark(self) -> tuple[int, ...]:
        return tuple(len(rows) for rows in self._lists())

    def truncate(self, mark: tuple[int, ...]) -> None:
        """Forget the rows queued after `mark` (a work of a batch failed before they were sent)."""
        for rows, n in zip(self._lists(), mark, strict=True):
            del rows[n:]
        self.episode_ids = {r["id"] for r in self.eps}
        self.src_keys = {(r["id"], r["ep"]) for r in self.srcs}
        self.ent_by_id, self.ent_claims, self.obs_claims, self.obs_of = {}, {}, {}, {}
        for row in self.ents:
            self._index_entity(row)
        for row in self.obs:
            self._index_observation(row)

    def claims_alias(self, group_id: str, key: str) -> bool:
        """Some queued observation names this alias (an entity inserted after it must not be first to claim it)."""
        return (group_id, key) in self.obs_claims


class Overlay:
    """The server's rows this transaction read (under its group locks), with `Pending` applied on every answer.

    Each table answers "known?" first: an unknown key is read from the server (`remember_*`) and then
    answered here for the rest of the transaction. A flush makes the server's rows newer than these,
    so the transaction forgets them all (`clear`) and reads again what it needs.
    """

    def __init__(self) -> None:
        self.aliases: dict[tuple[str, str], dict[str, str]] = {}  # (group, alias) -> {type: owning entity id}
        self.entities: dict[str, Row] = {}  # entity id -> row as stored
        self.chains: dict[tuple[str, str, str], list[tuple[Row, str, str]]] = {}  # (g, subject, rel) -> facts
        self.episodes: dict[str, str | None] = {}  # episode id -> the group storing it (None: not stored)
        # (group, vector bytes) -> (k asked, {entity id: cosine}) of the group's stored entities
        self.nearest: dict[tuple[str, bytes], tuple[int, dict[str, float]]] = {}

    def clear(self) -> None:
        self.nearest.clear()
        self.aliases.clear()
        self.entities.clear()
        self.chains.clear()
        self.episodes.clear()

    # -- what the server answered -------------------------------------------------------------

    def remember_alias(self, group_id: str, key: str, owners: list[tuple[str, Row]]) -> None:
        """The alias's stored owners, one entity per type (none: no entity has the alias)."""
        self.aliases[(group_id, key)] = {t: entity["id"] for t, entity in owners}
        for _, entity in owners:
            self.entities.setdefault(entity["id"], entity)

    def remember_entity(self, entity: Row) -> None:
        self.entities.setdefault(entity["id"], entity)

    def remember_chain(self, group_id: str, subject_id: str, relation: str, rows: list[tuple[Row, str, str]]) -> None:
        self.chains[(group_id, subject_id, relation)] = rows

    def remember_episode(self, episode_id: str, group_id: str | None) -> None:
        self.episodes[episode_id] = group_id

    def remember_similar(self, group_id: str, vector: Any, k: int, scores: dict[str, float]) -> None:
        self.nearest[(group_id, np.asarray(vector, dtype=np.float32).tobytes())] = (k, scores)

    def similar(self, group_id: str, vector: np.ndarray, k: int) -> dict[str, float] | None:
        """The stored entities nearest this vector, as read ahead (at least k of them), or None."""
        found = self.nearest.get((group_id, np.asarray(vector, dtype=np.float32).tobytes()))
        return dict(found[1]) if found is not None and found[0] >= k else None

    # -- answers: stored rows with the queued writes applied, as the flush would -----------------

    def stored_episode_group(self, episode_id: str) -> tuple[bool, str | None]:
        """(known, group storing it) for an episode id not queued in this transaction."""
        return episode_id in self.episodes, self.episodes.get(episode_id)

    def alias_known(self, group_id: str, key: str) -> bool:
        return (group_id, key) in self.aliases

    def owner(self, p: Pending, group_id: str, key: str, type_: str) -> str | None:
        """The entity of this type the alias names once the queue is flushed (the alias must be known).

        The flush creates entities before it applies observations, and an alias belongs, for each type,
        to whoever claimed it first: stored, then queued entities in order, then queued observations in
        order (an observation claims it for the observed entity's type).
        """
        return self.owners(p, group_id, key).get(type_)

    def owners(self, p: Pending, group_id: str, key: str) -> dict[str, str]:
        """Every type's owner of the alias once the queue is flushed (the alias must be known)."""
        found = dict(self.aliases[(group_id, key)])
        for t, eid in p.ent_claims.get((group_id, key), {}).items():
            found.setdefault(t, eid)
        for eid in p.obs_claims.get((group_id, key), ()):
            t = self._type_of(p, eid)
            if t is not None:
                found.setdefault(t, eid)
        return found

    def _type_of(self, p: Pending, entity_id: str) -> str | None:
        """The entity's type (types never change), None when it is neither stored (as read) nor queued."""
        row = self.entities.get(entity_id) or p.ent_by_id.get(entity_id)
        return None if row is None else (row.get("type") or "thing")

    def _exists(self, p: Pending, entity_id: str) -> bool:
        return entity_id in self.entities or entity_id in p.ent_by_id

    def entity_known(self, p: Pending, entity_id: str) -> bool:
        return self._exists(p, entity_id)

    def unknown_aliases(self, p: Pending, entity_ids: list[str]) -> list[tuple[str, str]]:
        """Aliases queued observations of these entities name that were never read: `entity` needs their owners."""
        return list(dict.fromkeys((o["g"], o["alias"]) for eid in entity_ids for o in p.obs_of.get(eid, ())
                                  if (o["g"], o["alias"]) not in self.aliases))

    def entity(self, p: Pending, entity_id: str) -> Row | None:
        """The entity's row after the flush: stored or queued, with every queued observation of it applied
        (the aliases those observations name must be known: see `unknown_aliases`)."""
        base = self.entities.get(entity_id)
        if base is None:
            base = p.ent_by_id.get(entity_id)
        if base is None:
            return None
        row = dict(base)
        aliases = list(row.get("aliases") or [])
        for o in p.obs_of.get(entity_id, ()):
            row["name"] = o["name"]
            if o["alias"] not in aliases and self.owner(p, o["g"], o["alias"], row.get("type") or "thing") == entity_id:
                aliases.append(o["alias"])
            seen = as_datetime(o["seen"])
            last, first = as_datetime(row.get("last_seen")), as_datetime(row.get("first_seen"))
            row["last_seen"] = seen if last is None or last < seen else last  # type: ignore[operator]
            row["first_seen"] = seen if first is None or first > seen else first  # type: ignore[operator]
        row["aliases"] = aliases
        return row

    def name_of(self, p: Pending, entity_id: str, stored: str) -> str:
        """An entity's display name after the flush (the last queued observation renames it)."""
        observed = p.obs_of.get(entity_id)
        if observed:
            return str(observed[-1]["name"])
        created = p.ent_by_id.get(entity_id)
        return str(created["name"]) if created is not None else stored

    def chain_known(self, group_id: str, subject_id: str, relation: str) -> bool:
        return (group_id, subject_id, relation) in self.chains

    def chain(self, p: Pending, group_id: str, subject_id: str, relation: str) -> list[tuple[Row, str, str]]:
        """Every fact with this subject and relation after the flush, as (row, subject name, object name),
        ordered as `facts_between` orders them: valid_at (none first), created_at, id."""
        rows = [(dict(r), sn, on) for r, sn, on in self.chains[(group_id, subject_id, relation)]]
        names = {r["id"]: (sn, on) for r, sn, on in rows}
        for f in p.facts:
            if f["group_id"] == group_id and f["subject_id"] == subject_id and f["relation"] == relation:
                rows.append((dict(f), f["subject_name"], f["object_name"]))
                names[f["id"]] = (self._stored_name(f["subject_id"], f["subject_name"]),
                                  self._stored_name(f["object_id"], f["object_name"]))
        by_id = {r["id"]: r for r, _, _ in rows}
        for u in p.upds:
            r = by_id.get(u["id"])
            if r is not None and u["g"] == group_id:
                r.update({k: u[k] for k in ("confidence", "last_seen", "valid_at", "invalid_at", "expired_at",
                                             "superseded_by")})
        for s in p.srcs:
            r = by_id.get(s["id"])
            if r is not None and s["g"] == group_id and s["ep"] not in (r.get("episode_ids") or []):
                r["episode_ids"] = [*(r.get("episode_ids") or []), s["ep"]]
                r["source_message_ids"] = [*(r.get("source_message_ids") or []), s["sm"]]
        out = [(r, self.name_of(p, r["subject_id"], names[r["id"]][0]), self.name_of(p, r["object_id"], names[r["id"]][1]))
               for r, _, _ in rows]

        def order(item: tuple[Row, str, str]) -> tuple[Any, ...]:
            r = item[0]
            valid = as_datetime(r.get("valid_at"))
            return (valid is not None, valid or EPOCH, as_datetime(r.get("created_at")) or EPOCH, r["id"])

        return sorted(out, key=order)

    def _stored_name(self, entity_id: str, given: str) -> str:
        row = self.entities.get(entity_id)
        return str(row["name"]) if row is not None else given
