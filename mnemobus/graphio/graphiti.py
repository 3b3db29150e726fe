"""`mnemobus import graphiti --uri bolt://...`: a Graphiti deployment's graph into mnemobus, rows as they were.

Graphiti (0.31) keeps, in Neo4j, `(:Episodic {uuid, group_id, name, content, source_description, valid_at,
created_at})`, `(:Entity {uuid, group_id, name, summary, created_at})` with extra labels for its types,
`(:Entity)-[:RELATES_TO {uuid, group_id, name, fact, episodes, valid_at, invalid_at, expired_at,
created_at}]->(:Entity)` and `(:Episodic)-[:MENTIONS]->(:Entity)`. Each becomes the mnemobus row it means,
keeping Graphiti's uuids (so a second run stores nothing twice) and both time axes, and is written like a
jsonl export's rows (`restore.write_rows`), not extracted again: the facts are the ones Graphiti's LLM drew.
Graphiti's vectors come from another model (often 1,536 wide): names, facts and episodes are embedded again
with the configured embedder, one batch per write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import anyio

from mnemobus.engine.embed import Embedder
from mnemobus.engine.ingest import EMBED_EPISODE_CHARS
from mnemobus.engine.text import display_name, has_injection_markers, normalise_name
from mnemobus.shared.errors import InvalidMessage, MnemobusError
from mnemobus.graphio.checkpoint import Checkpoint
from mnemobus.graphio.progress import Counts, ProgressLine
from mnemobus.graphio.restore import Row, write_rows
from mnemobus.graphio.resumable import DeadLetters, Line
from mnemobus.graphio.rows import item_of
from mnemobus.shared.groups import InvalidGroupId, validate_group_id
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import Entity, Episode, Fact

#: Graphiti's server stores a message as "{role}({role_type}): {content}"
_MESSAGE = re.compile(r"^(?P<name>[^\n()]{0,256})\((?P<role>user|assistant|system)\): (?P<text>.*)\Z", re.DOTALL)

QUERIES = {
    "groups": "MATCH (n) WHERE (n:Entity OR n:Episodic) AND n.uuid IS NOT NULL RETURN DISTINCT n.group_id AS g",
    "entities": "MATCH (n:Entity {group_id: $g}) WHERE n.uuid IS NOT NULL RETURN n.uuid AS uuid, n.name AS name, "
                "n.summary AS summary, labels(n) AS labels, n.created_at AS created_at ORDER BY n.uuid",
    "edges": "MATCH (s:Entity)-[e:RELATES_TO {group_id: $g}]->(t:Entity) RETURN e.uuid AS uuid, s.uuid AS source, "
             "t.uuid AS target, s.name AS source_name, t.name AS target_name, e.name AS name, e.fact AS fact, "
             "e.episodes AS episodes, e.valid_at AS valid_at, e.invalid_at AS invalid_at, "
             "e.expired_at AS expired_at, e.created_at AS created_at ORDER BY e.uuid",
    "episodes": "MATCH (n:Episodic {group_id: $g}) RETURN n.uuid AS uuid, n.name AS name, n.content AS content, "
                "n.source_description AS description, n.valid_at AS valid_at, n.created_at AS created_at "
                "ORDER BY n.valid_at, n.uuid",
    "mentions": "MATCH (p:Episodic {group_id: $g})-[:MENTIONS]->(n:Entity) RETURN p.uuid AS episode, n.uuid AS entity",
}


def _time(value: Any) -> datetime | None:
    """A Neo4j temporal (or None) as an aware UTC datetime."""
    if value is None:
        return None
    native = value.to_native() if hasattr(value, "to_native") else value
    if not isinstance(native, datetime):
        raise InvalidMessage("invalid_row", f"not a date-time: {value!r}")
    return native.astimezone(UTC) if native.tzinfo else native.replace(tzinfo=UTC)


def entity_row(group: str, r: dict[str, Any]) -> Entity:
    kinds = [label.lower() for label in r["labels"] or () if label != "Entity"]
    name = display_name(r["name"] or "")
    return item_of(Entity, {"id": r["uuid"], "group_id": group, "name": name, "canonical_name": normalise_name(name),
                            "type": kinds[0] if kinds else "thing", "summary": r["summary"] or "",
                            "first_seen": _time(r["created_at"]), "last_seen": _time(r["created_at"])})


def fact_row(group: str, r: dict[str, Any], said_by: dict[str, str]) -> Fact:
    episodes = [e for e in r["episodes"] or () if isinstance(e, str)]
    created = _time(r["created_at"]) or datetime.now(UTC)
    return item_of(Fact, {
        "id": r["uuid"], "group_id": group, "subject_id": r["source"], "object_id": r["target"],
        "subject_name": r["source_name"] or "", "object_name": r["target_name"] or "",
        "relation": (r["name"] or "related_to").lower(), "edge_type": "semantic", "fact": r["fact"] or "",
        "confidence": 1.0, "valid_at": _time(r["valid_at"]), "invalid_at": _time(r["invalid_at"]),
        "expired_at": _time(r["expired_at"]), "created_at": created, "last_seen": created,
        "episode_ids": episodes, "source_message_ids": [said_by.get(e, e) for e in episodes]})


def episode_row(group: str, r: dict[str, Any]) -> Episode:
    content = r["content"] or ""
    said = _MESSAGE.match(content)
    speaker, role = (said["name"].strip() or None, said["role"]) if said else (None, "user")
    if not content.strip():
        raise InvalidMessage("empty_content", f"episode {r['uuid']} has no content")
    return item_of(Episode, {
        "id": r["uuid"], "group_id": group, "content": content, "role": role, "source_message_id": r["uuid"],
        "reference_time": _time(r["valid_at"]) or _time(r["created_at"]), "created_at": _time(r["created_at"]),
        "speaker": speaker, "name": (r["name"] or None), "platform": (r["description"] or "graphiti")[:64]})


async def embed_rows(embedder: Embedder | None, rows: Sequence[Row]) -> None:
    """Each row's vector from the configured embedder, one call for the batch (Graphiti's are another model's)."""
    if embedder is None or not rows:
        return
    texts = [r.item.content[:EMBED_EPISODE_CHARS] if isinstance(r.item, Episode) else r.item.fact
             if isinstance(r.item, Fact) else display_name(r.item.name) for r in rows]
    vectors = await anyio.to_thread.run_sync(embedder.embed, texts)
    for row, vec in zip(rows, vectors, strict=True):
        row.vec = vec


async def _read(session: Any, query: str, group: str) -> list[dict[str, Any]]:
    result = await session.run(query, g=group)
    return [dict(record) async for record in result]


def group_rows(group: str, read: dict[str, list[dict[str, Any]]],
               refuse: Callable[[str, str, InvalidMessage], None]) -> list[Row]:
    """One Graphiti group as rows to write (entities, facts, episodes); `refuse(kind, uuid, why)` each bad one."""
    entities: list[Row] = []
    for r in read["entities"]:
        try:
            entities.append(Row(entity_row(group, r)))
        except InvalidMessage as exc:
            refuse("entity", str(r.get("uuid")), exc)
    known = {row.item.id for row in entities}
    said_by = {r["uuid"]: r["uuid"] for r in read["episodes"]}
    facts: list[Row] = []
    for r in read["edges"]:
        try:
            if r["source"] not in known or r["target"] not in known:
                raise InvalidMessage("missing_entity", "an end of the edge is not an entity that could be imported")
            facts.append(Row(fact_row(group, r, said_by)))
        except InvalidMessage as exc:
            refuse("edge", str(r.get("uuid")), exc)
    mentions: dict[str, list[str]] = {}
    for m in read["mentions"]:
        if m["entity"] in known:
            mentions.setdefault(m["episode"], []).append(m["entity"])
    episodes: list[Row] = []
    for r in read["episodes"]:
        try:
            episode = episode_row(group, r)
            episodes.append(Row(episode, None, has_injection_markers(episode.content), mentions.get(episode.id, ())))
        except InvalidMessage as exc:
            refuse("episode", str(r.get("uuid")), exc)
    return entities + facts + episodes


async def import_graphiti(driver: Any, store: GraphStore, embedder: Embedder | None, groups: Sequence[str] | None,
                          checkpoint: Checkpoint, dead: DeadLetters, *, batch: int = 200,
                          out: TextIO | None = None) -> Counts:
    """Every asked group (all of Graphiti's when None) into `store`; a checkpoint after each group."""
    state = checkpoint.load() or {}
    done: list[str] = list(state.get("done", []))
    counts = Counts.of(state["counts"]) if "counts" in state else Counts()
    async with driver.session(default_access_mode="READ") as session:
        names = list(groups) if groups else sorted(r["g"] for r in await _read(session, QUERIES["groups"], ""))
        for name in names:
            if name in done:
                continue
            try:
                group = validate_group_id(name)
            except InvalidGroupId as exc:
                raise MnemobusError(f"Graphiti group {name!r} cannot be a mnemobus group: {exc}") from None
            read = {kind: await _read(session, QUERIES[kind], group) for kind in ("entities", "edges", "episodes",
                                                                                    "mentions")}
            dead_before = counts.dead_lettered

            def refuse(kind: str, uuid: str, exc: InvalidMessage) -> None:
                record = json.dumps({"group": group, "kind": kind, "uuid": uuid}).encode()
                dead.add(counts, Line(0, record), exc.reason, exc.detail, where=f"{group} {kind} {uuid}")

            rows = group_rows(group, read, refuse)
            counts.read += counts.dead_lettered - dead_before
            line = ProgressLine(f"import graphiti {group}", len(rows), out=out)
            line.show(counts, 0)
            for i in range(0, len(rows), batch):
                chunk = rows[i : i + batch]
                await embed_rows(embedder, [r for r in chunk if not r.screened])
                for fate in await write_rows(store, group, chunk):
                    counts.stored += fate is True
                    counts.skipped += fate is False
                counts.read += len(chunk)
                line.show(counts, i + len(chunk), force=i + batch >= len(rows))
            line.close()
            done.append(group)
            checkpoint.save({"done": done, "counts": counts.state(), "dead_bytes": dead.size()})
    checkpoint.clear()
    return counts
