"""A group's rows in a portable format: jsonl (rebuilds the group), GraphML (graph tools), Mermaid (docs).

Every format reads one `GroupExport` (the store's own snapshot of the group, the one `mnemobus migrate`
copies), so they can never disagree about what the group holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from xml.sax.saxutils import escape, quoteattr

from mnemobus.graphio.rows import header, row_of, vector_text
from mnemobus.store.model import Fact, GroupExport


def active(fact: Fact, at: datetime) -> bool:
    """The store contract's validity: took effect by `at` and not ended by it."""
    return (fact.valid_at is None or fact.valid_at <= at) and (fact.invalid_at is None or at < fact.invalid_at)


def jsonl_lines(dump: GroupExport, exported_at: datetime | None = None) -> Iterator[str]:
    """A header, then every entity, fact and episode (with the entities it mentions), one JSON object a line.

    Entities come before the facts that join them, so a reader can write the rows in file order."""
    counts = {"episodes": len(dump.episodes), "entities": len(dump.entities), "facts": len(dump.facts)}
    yield _line(header(dump.group_id, counts, exported_at or datetime.now(UTC)))
    for entity, vec in dump.entities:
        yield _line(row_of("entity", entity, embedding=vector_text(vec)))
    for fact, vec in dump.facts:
        yield _line(row_of("fact", fact, embedding=vector_text(vec)))
    mentions: dict[str, list[str]] = {}
    for episode_id, entity_id in dump.mentions:
        mentions.setdefault(episode_id, []).append(entity_id)
    for episode, screened, vec in dump.episodes:
        yield _line(row_of("episode", episode, screened=screened, embedding=vector_text(vec),
                           entity_ids=mentions.get(episode.id, [])))


def _line(obj: dict[str, object]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


def _time(value: datetime | None) -> str:
    return value.isoformat() if value else ""


_GRAPHML_KEYS = (
    ("node", "name", "string"), ("node", "type", "string"), ("node", "aliases", "string"),
    ("node", "first_seen", "string"), ("node", "last_seen", "string"),
    ("edge", "relation", "string"), ("edge", "fact", "string"), ("edge", "edge_type", "string"),
    ("edge", "confidence", "double"), ("edge", "valid_at", "string"), ("edge", "invalid_at", "string"),
    ("edge", "created_at", "string"), ("edge", "expired_at", "string"), ("edge", "active", "boolean"),
)


def graphml_lines(dump: GroupExport, at: datetime | None = None) -> Iterator[str]:
    """Entities as nodes, every fact (ended ones too, `active` says which) as a directed edge with its times.

    Facts are edges with their own ids, so two facts between one pair stay two edges (a multigraph)."""
    now = at or datetime.now(UTC)
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
    for scope, name, kind in _GRAPHML_KEYS:
        yield f'  <key id="{name}" for="{scope}" attr.name="{name}" attr.type="{kind}"/>\n'
    yield f'  <graph id={quoteattr(dump.group_id)} edgedefault="directed">\n'
    for entity, _ in dump.entities:
        data = {"name": entity.name, "type": entity.type, "aliases": "|".join(entity.aliases),
                "first_seen": _time(entity.first_seen), "last_seen": _time(entity.last_seen)}
        yield f"    <node id={quoteattr(entity.id)}>{_data(data)}</node>\n"
    for fact, _ in dump.facts:
        data = {"relation": fact.relation, "fact": fact.fact, "edge_type": fact.edge_type,
                "confidence": repr(fact.confidence), "valid_at": _time(fact.valid_at),
                "invalid_at": _time(fact.invalid_at), "created_at": _time(fact.created_at),
                "expired_at": _time(fact.expired_at), "active": "true" if active(fact, now) else "false"}
        yield (f"    <edge id={quoteattr(fact.id)} source={quoteattr(fact.subject_id)}"
               f" target={quoteattr(fact.object_id)}>{_data(data)}</edge>\n")
    yield "  </graph>\n</graphml>\n"


def _data(values: dict[str, str]) -> str:
    return "".join(f'<data key="{k}">{escape(_xml_text(v))}</data>' for k, v in values.items() if v != "")


def _xml_text(text: str) -> str:
    """XML 1.0 cannot hold most control characters even escaped; a stored message may contain them."""
    return "".join(c if c in "\t\n\r" or (" " <= c <= "\ud7ff") or ("\ue000" <= c <= "\ufffd")
                   or c > "\uffff" else "\ufffd" for c in text)


def mermaid_lines(dump: GroupExport, at: datetime | None = None) -> Iterator[str]:
    """A Mermaid flowchart of the facts active now (or at `at`) and the entities they join.

    Ended facts are left out: a diagram is read at a glance, and the jsonl and GraphML exports keep history."""
    now = at or datetime.now(UTC)
    facts = [f for f, _ in dump.facts if active(f, now)]
    used = {f.subject_id for f in facts} | {f.object_id for f in facts}
    names = {e.id: f"n{i}" for i, (e, _) in enumerate(e for e in dump.entities if e[0].id in used)}
    yield "flowchart LR\n"
    for entity, _ in dump.entities:
        if entity.id in names:
            yield f'  {names[entity.id]}["{_mermaid_text(entity.name)}"]\n'
    for fact in facts:
        yield f'  {names[fact.subject_id]} -- "{_mermaid_text(fact.relation)}" --> {names[fact.object_id]}\n'


def _mermaid_text(text: str) -> str:
    """Mermaid's entity codes for what would end a label or start markup; a line break becomes a space."""
    table = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "#": "#35;", "\n": " ", "\r": " "}
    return "".join(table.get(c, c) for c in text)[:200]
