"""`mnemobus import jsonl FILE`: a `graph export --format jsonl` file back into a store, rows as they were.

Not through extraction: the export holds the facts some extractor drew (an LLM, an older rule set), with
their supersession and both time axes; extracting the episodes again would give back other facts. The rows
are validated field by field against the store's own dataclasses (`rows.item_of`: types, UTC times, group
id) and written through the store's one write transaction, the one ingestion writes through, one batch per
transaction. A row already present (same id) is skipped, so a resumed or repeated run stores nothing twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mnemobus.engine.embed import DIM
from mnemobus.shared.errors import InvalidMessage, MnemobusError
from mnemobus.graphio.progress import Counts
from mnemobus.graphio.resumable import DeadLetters, Line
from mnemobus.graphio.rows import FORMAT, VERSION, item_of, vector_of
from mnemobus.shared.groups import GroupId, InvalidGroupId, validate_group_id
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import Entity, Episode, Fact, Vector

KINDS = {"entity": Entity, "fact": Fact, "episode": Episode}


@dataclass(slots=True)
class Row:
    """One row to write: the item, its embedding, and for an episode its screening flag and mentions."""

    item: Entity | Fact | Episode
    vec: Vector | None = None
    screened: bool = False
    mentions: Sequence[str] = ()
    line: Line | None = None  # where it was read, when it was read from a file

    @classmethod
    def of(cls, line: Line, item: Entity | Fact | Episode, vec: Vector | None, raw: dict[str, Any]) -> Row:
        mentions = raw.get("entity_ids", [])
        if not isinstance(mentions, list) or not all(isinstance(m, str) for m in mentions):
            raise InvalidMessage("invalid_row", "entity_ids must be a list of entity ids")
        return cls(item, vec, bool(raw.get("screened", False)), mentions, line)


def _header(line: Line) -> GroupId:
    try:
        head = json.loads(line.data)
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("kind") != "group" or head.get("format") != FORMAT:
        raise MnemobusError(f"line {line.number} is not the header of a mnemobus jsonl export "
                            "(`mnemobus graph export GROUP --format jsonl` writes one)")
    if head.get("v") != VERSION:
        raise MnemobusError(f"the export is version {head.get('v')!r}; this mnemobus reads version {VERSION}")
    try:
        return validate_group_id(head.get("group_id"))
    except InvalidGroupId as exc:
        raise MnemobusError(f"line {line.number}: the export's group id is refused: {exc}") from None


def _row(line: Line, group: GroupId, dim: int) -> Row:
    try:
        raw = json.loads(line.data)
    except ValueError as exc:
        raise InvalidMessage("malformed_json", f"not valid JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("kind") not in KINDS:
        raise InvalidMessage("invalid_row", f"kind must be one of {', '.join(KINDS)}")
    item = item_of(KINDS[raw["kind"]], raw)
    if item.group_id != group:
        raise InvalidMessage("group_mismatch", f"row of group {item.group_id!r} in the export of {group!r}")
    vec = vector_of(raw.get("embedding"))
    if vec is not None and len(vec) != dim:  # stored, it would fail every vector search of the group
        raise InvalidMessage("invalid_row", f"embedding has {len(vec)} values; this store's embeddings have {dim}")
    return Row.of(line, item, vec, raw)


class RowsImporter:
    def __init__(self, store: GraphStore, *, dim: int = DIM) -> None:
        self.store = store
        self.dim = dim  # every vector the store holds: a row with another width is refused, not stored

    async def __call__(self, batch: list[Line], counts: Counts, dead: DeadLetters, state: dict[str, Any]) -> None:
        if "group_id" not in state:
            state["group_id"] = _header(batch[0])
            counts.read -= 1  # the header is not a row
            batch = batch[1:]
        group = GroupId(state["group_id"])
        rows: list[Row] = []
        for line in batch:
            try:
                rows.append(_row(line, group, self.dim))
            except InvalidMessage as exc:
                dead.add(counts, line, exc.reason, exc.detail)
        try:
            stored = await self._write(group, rows)
        except InvalidMessage:  # one row the store refuses (an episode id taken in another group): find it alone
            stored = []
            for row in rows:
                try:
                    stored += await self._write(group, [row])
                except InvalidMessage as exc:
                    assert row.line is not None  # rows of a file know their line
                    dead.add(counts, row.line, exc.reason, exc.detail)
                    stored.append(None)
        for flag in stored:
            if flag is True:
                counts.stored += 1
            elif flag is False:
                counts.skipped += 1

    async def _write(self, group: GroupId, rows: list[Row]) -> list[bool | None]:
        return await write_rows(self.store, group, rows)


async def write_rows(store: GraphStore, group: GroupId, rows: Sequence[Row]) -> list[bool | None]:
    """Each row's fate, written in one transaction in the order given: True stored, False already present.

    Entities must come before the facts that join them and the episodes that mention them."""
    ids = {kind: [r.item.id for r in rows if isinstance(r.item, cls)] for kind, cls in KINDS.items()}
    present = {e.id for e in await store.get_entities(group, ids["entity"])} if ids["entity"] else set()
    present |= {f.id for f in await store.get_facts(group, ids["fact"])} if ids["fact"] else set()
    fates: list[bool | None] = []
    async with store.transaction() as tx:
        for row in rows:
            item = row.item
            if isinstance(item, Episode):
                created = await tx.insert_episode(item, screened=row.screened, embedding=row.vec)
                for entity_id in row.mentions if created else ():
                    await tx.link_episode_entity(group, item.id, entity_id)
                fates.append(created)
            elif item.id in present:
                fates.append(False)
            elif isinstance(item, Entity):
                await tx.insert_entity(item, row.vec)
                fates.append(True)
            else:
                await tx.insert_fact(item, row.vec)
                fates.append(True)
    return fates
