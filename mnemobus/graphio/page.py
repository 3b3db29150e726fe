"""One group as one self-contained HTML page: what `GET /graph/{group_id}` serves and `--format html` writes.

Everything is inside the file (data, style, script; positions laid out here by `layout`), and the page's
Content-Security-Policy allows no network at all and only its own script (by hash), so it opens offline
and a stored string can never run as code. It holds every entity and every fact, ended ones included, so the
time control can show the graph as of any date without asking the server again, and for each fact the turns
it came from (capped at TURN_CHARS characters each).
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime
from html import escape
from typing import Any

from mnemobus.graphio.layout import layout
from mnemobus.graphio.page_script import SCRIPT, STYLE
from mnemobus.store.model import GroupExport

TURN_CHARS = 600


def _ms(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def page_data(dump: GroupExport, now: datetime | None = None) -> dict[str, Any]:
    """The page's JSON: compact rows (arrays, not objects: a 5,000-entity page is a third smaller)."""
    index = {e.id: i for i, (e, _) in enumerate(dump.entities)}
    facts = [f for f, _ in dump.facts if f.subject_id in index and f.object_id in index]
    positions = layout(len(index), [(index[f.subject_id], index[f.object_id]) for f in facts])
    degree = [0] * len(index)
    for f in facts:
        degree[index[f.subject_id]] += 1
        degree[index[f.object_id]] += 1
    episodes = {ep.id: ep for ep, _, _ in dump.episodes}
    turns: dict[str, int] = {}
    for f in facts:
        for ep_id in f.episode_ids:
            if ep_id in episodes and ep_id not in turns:
                turns[ep_id] = len(turns)
    at = now or datetime.now(UTC)
    times = [t for f in facts for t in (f.valid_at, f.invalid_at) if t] + [
        e.first_seen for e, _ in dump.entities if e.first_seen]
    return {
        "group": dump.group_id,
        "now": _ms(max([at, *times])),
        "first": _ms(min(times, default=at)),
        "entities": [[e.name, e.type, x, y, degree[i], _ms(e.first_seen),
                      ", ".join(a for a in e.aliases if a.lower() != e.name.lower())]
                     for i, ((e, _), (x, y)) in enumerate(zip(dump.entities, positions, strict=True))],
        "facts": [[index[f.subject_id], index[f.object_id], f.relation, f.fact, _ms(f.valid_at), _ms(f.invalid_at),
                   [turns[i] for i in f.episode_ids if i in turns]] for f in facts],
        "episodes": [[ep.role, ep.speaker or "", _ms(ep.reference_time), ep.content[:TURN_CHARS]]
                     for ep in (episodes[i] for i in turns)],
    }


def _script_json(data: dict[str, Any]) -> str:
    """JSON safe inside a <script> element: no '<' can close it, no '&' can start an entity."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace(
        "\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _hash(source: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()


#: no network of any kind, only the page's own script; inline styles (the script shows and hides elements)
CSP = ("default-src 'none'; script-src '{script}'; style-src 'unsafe-inline'; img-src data:; "
       "base-uri 'none'; form-action 'none'")


def content_security_policy() -> str:
    return CSP.format(script=_hash(SCRIPT))


def page_html(dump: GroupExport, now: datetime | None = None) -> str:
    group = escape(dump.group_id)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{escape(content_security_policy())}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mnemobus: {group}</title><style>{STYLE}</style></head>
<body><header><h1>{group}</h1><span id="stats"></span>
<label>as of <input id="asof" type="date"></label><input id="slider" type="range" step="1" aria-label="as of">
<button id="now" type="button">now</button>
<input id="search" type="search" placeholder="search entities" aria-label="search entities"></header>
<main><svg id="graph" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="the memory graph of {group}">
<g id="edges"></g><g id="nodes"></g><g id="labels"></g></svg>
<aside><div id="results"></div><div id="facts"><p>Click an entity to see its facts and the turns they came
from. Drag to pan, wheel to zoom.</p></div></aside></main>
<script id="data" type="application/json">{_script_json(page_data(dump, now))}</script>
<script>{SCRIPT}</script>
</body></html>
"""
