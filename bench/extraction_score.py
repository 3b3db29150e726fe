"""Scoring extracted facts against the labelled set (bench/extraction_set): parsing, lenient matching, figures.

Pure functions (unit-tested in tests/bench/test_extraction_score.py), so the bench and its tests agree on what a
match is. A fact matches a gold fact when the subjects match, the relations mean the same (one canonical relation of
the product's table, mnemobus/engine/relations.py, read the way round it stores them; or one synonym class below,
or one relation the inverse of the other: "Anna sister_of Maya" is "Maya has_sister Anna") and the objects match. Names match leniently: case, articles and possessives aside, equal or one's words all inside the
other's ("green tea" / "tea", "TU Berlin" / "Berlin" do not both hold: the shorter must be a whole-word part).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path

import yaml

# relations that say the same thing; every relation not listed is its own class
SYNONYMS: tuple[frozenset[str], ...] = tuple(frozenset(c.split()) for c in (
    "lives_in resides_in based_in lives_at",
    "works_at works_for employed_at employed_by",
    "works_as is_a_job job occupation profession",
    "works_in",
    "likes loves enjoys fan_of into supports prefers",
    "dislikes hates",
    "has_pet owns_pet",
    "is_a is_an kind",
    "member_of plays_in belongs_to",
    "plays",
    "visited travelled_to went_to",
    "plans_to_visit going_to will_visit travelling_to flying_to",
    "is_married_to married_to spouse_of",
    "owns has_car owns_car",
    "speaks",
    "drinks",
    "eats",
    "avoids does_not_eat",
    "born_in",
    "from comes_from",
    "grew_up_in",
    "has_condition suffers_from diagnosed_with",
    "takes",
    "allergic_to",
    "studies studying",
    "studies_at",
    "learning learns",
    "teaches",
    "runs owns_business",
))
# kinship and other roles: "X sister_of Y" is the same fact as "Y has_sister X"
_OF = re.compile(r"^(?P<role>\w+?)_of$")
_HAS = re.compile(r"^has_(?P<role>\w+)$")
_ROLE_SYNONYMS = {"wife": "spouse", "husband": "spouse", "boss": "manager", "team_lead": "manager", "mum": "mother",
                  "mom": "mother", "dad": "father", "kid": "child", "son": "child", "daughter": "child"}
_FAMILY = {"spouse", "child", "mother", "father", "parent"}


def relation_key(relation: str) -> tuple[str, bool]:
    """A relation's meaning class, and whether it is read backwards (has_X is X_of turned round)."""
    rel = relation.lower().strip().replace(" ", "_")
    for cls in SYNONYMS:
        if rel in cls:
            return min(cls), False
    if m := _OF.match(rel):
        role = m.group("role")
        return f"role:{_ROLE_SYNONYMS.get(role, role)}", False
    if (m := _HAS.match(rel)) and m.group("role") not in ("pet", "condition"):
        role = m.group("role")
        return f"role:{_ROLE_SYNONYMS.get(role, role)}", True
    return rel, False


_DROP = re.compile(r"^(?:the|a|an|my|our|his|her|their|some)\s+", re.IGNORECASE)


def name_words(name: str) -> tuple[str, ...]:
    text = _DROP.sub("", name.strip().lower())
    return tuple(re.findall(r"[\w&'.-]+", text.replace("'s ", " ")))


def names_match(a: str, b: str) -> bool:
    wa, wb = name_words(a), name_words(b)
    if not wa or not wb:
        return False
    if wa == wb:
        return True
    short, long_ = (wa, wb) if len(wa) < len(wb) else (wb, wa)
    return all(w in long_ for w in short)


@dataclass(frozen=True)
class Triple:
    subject: str
    relation: str
    object: str
    since: str | None = None  # "2021", "2026-03", "2026-06-14": when the gold says it took effect


def parse_triple(text: str) -> Triple:
    body, _, since = text.partition("@")
    parts = [p.strip() for p in body.split("|")]
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"not 'subject | relation | object': {text!r}")
    return Triple(parts[0], parts[1], parts[2], since.strip() or None)


def _as_stored(t: Triple) -> tuple[str, str, str, bool]:
    """The triple under the product's relation table (what ingest stores): subject, relation, object, symmetric."""
    from mnemobus.engine.relations import canonical, symmetric

    name, turned = canonical(t.relation, t.object)
    s, o = (t.object, t.subject) if turned else (t.subject, t.object)
    return s, name, o, symmetric(name)


def facts_match(got: Triple, want: Triple) -> bool:
    gs, grel, go, sym = _as_stored(got)
    ws, wrel, wo, _ = _as_stored(want)
    if grel == wrel and ((names_match(gs, ws) and names_match(go, wo)) or (
            sym and names_match(gs, wo) and names_match(go, ws))):
        return True
    gkey, gback = relation_key(got.relation)
    wkey, wback = relation_key(want.relation)
    if gkey != wkey:
        return False
    gs, go = (got.object, got.subject) if gback else (got.subject, got.object)
    ws, wo = (want.object, want.subject) if wback else (want.subject, want.object)
    return names_match(gs, ws) and names_match(go, wo)


def since_matches(valid_from: datetime | None, since: str) -> bool:
    """Does a fact's valid-from agree with the gold's date, to the precision the gold gives?"""
    if valid_from is None:
        return False
    return valid_from.strftime("%Y-%m-%d")[: len(since)] == since


TIERS = ("plain", "reworded", "idiomatic")


@dataclass
class Item:
    id: str
    turns: list[tuple[str, str]]  # (speaker name, text)
    at: datetime
    facts: list[Triple] = field(default_factory=list)
    holds: list[Triple] = field(default_factory=list)
    ends: list[Triple] = field(default_factory=list)
    fact_id: str | None = None  # items phrasing one fact share it (consistency)
    tier: str | None = None  # plain | reworded | idiomatic
    before: list[tuple[str, str]] = field(default_factory=list)  # turns said earlier, ingested first
    before_at: datetime | None = None
    keeps: list[Triple] = field(default_factory=list)  # facts the turns must NOT end


def _turns(path: Path, item_id: str, raw: Sequence[str]) -> list[tuple[str, str]]:
    turns = []
    for turn in raw:
        name, sep, text = str(turn).partition(":")
        if not sep or not text.strip():
            raise ValueError(f"{path}: {item_id}: a turn must be 'Name: text': {turn!r}")
        turns.append((name.strip(), text.strip()))
    return turns


def load_items(path: Path) -> list[Item]:
    """A labelled file's items; the blind format adds `fact_id`, `tier`, `before`, `before_at` and `keeps`."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    default_at = _when(data["at"])
    items = []
    for raw in data["items"]:
        tier = raw.get("tier")
        if tier is not None and tier not in TIERS:
            raise ValueError(f"{path}: {raw['id']}: tier must be one of {', '.join(TIERS)}, not {tier!r}")
        at = _when(raw["at"]) if "at" in raw else default_at
        items.append(Item(raw["id"], _turns(path, raw["id"], raw["turns"]), at,
                          [parse_triple(t) for t in raw.get("facts", [])],
                          [parse_triple(t) for t in raw.get("holds", [])],
                          [parse_triple(t) for t in raw.get("ends", [])],
                          str(raw["fact_id"]) if raw.get("fact_id") is not None else None, tier,
                          _turns(path, raw["id"], raw.get("before", [])),
                          _when(raw["before_at"]) if "before_at" in raw else None,
                          [parse_triple(t) for t in raw.get("keeps", [])]))
    return items


def _when(value: str | datetime) -> datetime:
    t = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@dataclass
class Tally:
    """Counts over items; figures derive from them."""

    got: int = 0  # facts extracted
    got_right: int = 0  # extracted facts matching some gold fact
    want: int = 0  # gold facts
    want_found: int = 0  # gold facts some extracted fact matches
    bearing: int = 0  # items with at least one gold fact
    bearing_found: int = 0  # ... where at least one gold fact was found
    dated: int = 0  # found gold facts that carry a date
    dated_right: int = 0  # ... whose fact got that date
    ended: int = 0  # facts the item's turns ended (held ones and past ones recorded)
    ended_right: int = 0
    want_ended: int = 0
    want_ended_found: int = 0
    collateral: int = 0  # held facts ended that the gold keeps (or, with `before`, any held fact wrongly ended)
    kept_ended: int = 0  # facts named in `keeps` that were ended
    raised: int = 0  # held facts the turns should end whose confidence rose instead
    tier_want: dict[str, int] = field(default_factory=dict)
    tier_found: dict[str, int] = field(default_factory=dict)
    phrasings: dict[str, list[bool]] = field(default_factory=dict)  # fact_id -> per item: all its facts found
    change_phrasings: dict[str, list[bool]] = field(default_factory=dict)  # fact_id -> per item: all its ends found
    tier_ends: dict[str, int] = field(default_factory=dict)
    tier_ends_found: dict[str, int] = field(default_factory=dict)
    missed: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)

    def add_facts(self, item: Item, got: Sequence[tuple[Triple, datetime | None]]) -> None:
        self.got += len(got)
        self.want += len(item.facts)
        for triple, _ in got:
            if any(facts_match(triple, w) for w in item.facts):
                self.got_right += 1
            else:
                self.wrong.append(f"{item.id}: {triple.subject} | {triple.relation} | {triple.object}")
        found = 0
        for w in item.facts:
            hits = [when for triple, when in got if facts_match(triple, w)]
            if hits:
                found += 1
                if w.since:
                    self.dated += 1
                    self.dated_right += any(since_matches(when, w.since) for when in hits)
            else:
                self.missed.append(f"{item.id}: {w.subject} | {w.relation} | {w.object}")
        self.want_found += found
        if item.facts:
            self.bearing += 1
            self.bearing_found += found > 0
            if item.tier:
                self.tier_want[item.tier] = self.tier_want.get(item.tier, 0) + len(item.facts)
                self.tier_found[item.tier] = self.tier_found.get(item.tier, 0) + found
            if item.fact_id:
                self.phrasings.setdefault(item.fact_id, []).append(found == len(item.facts))

    def add_held_endings(self, item: Item, ended: Iterable[Triple], raised: Iterable[Triple] = ()) -> None:
        """Endings of what the store held from `before` (and past facts the turns recorded): every ending that
        matches no gold ending is collateral; one that ends a `keeps` fact is counted apart too."""
        ended = list(ended)
        self.add_endings(item, ended)
        self.collateral += sum(1 for e in ended if not any(facts_match(e, w) for w in item.ends)
                               and not any(facts_match(e, h) for h in item.holds + item.facts))
        self.kept_ended += sum(1 for e in ended if any(facts_match(e, k) for k in item.keeps))
        self.raised += sum(1 for r in raised if any(facts_match(r, w) for w in item.ends))

    def add_endings(self, item: Item, ended: Iterable[Triple]) -> None:
        ended = list(ended)
        self.ended += len(ended)
        self.want_ended += len(item.ends)
        for e in ended:
            if any(facts_match(e, w) for w in item.ends):
                self.ended_right += 1
            else:
                self.wrong.append(f"{item.id}: ENDED {e.subject} | {e.relation} | {e.object}")
                if any(facts_match(e, h) for h in item.holds + item.facts):
                    self.collateral += 1  # it should have stayed
        found = 0
        for w in item.ends:
            if any(facts_match(e, w) for e in ended):
                self.want_ended_found += 1
                found += 1
            else:
                self.missed.append(f"{item.id}: END {w.subject} | {w.relation} | {w.object}")
        if item.ends and item.tier:
            self.tier_ends[item.tier] = self.tier_ends.get(item.tier, 0) + len(item.ends)
            self.tier_ends_found[item.tier] = self.tier_ends_found.get(item.tier, 0) + found
        if item.ends and item.fact_id:
            self.change_phrasings.setdefault(item.fact_id, []).append(found == len(item.ends))

    @classmethod
    def pooled(cls, tallies: Iterable[tuple[str, Tally]]) -> Tally:
        """Several files' counts as one tally, so a pooled figure weighs every item alike (a mean of per-file ratios
        would weigh a file of three changes like one of thirty). Phrasing ids are kept apart per file."""
        out = cls()
        for name, tally in tallies:
            for f in fields(cls):
                mine, theirs = getattr(out, f.name), getattr(tally, f.name)
                if isinstance(theirs, int):
                    setattr(out, f.name, mine + theirs)
                elif isinstance(theirs, list):
                    mine.extend(theirs)
                elif f.name in ("phrasings", "change_phrasings"):
                    mine.update({f"{name}/{k}": list(v) for k, v in theirs.items()})
                else:
                    for k, v in theirs.items():
                        mine[k] = mine.get(k, 0) + v
        return out

    def figures(self) -> dict[str, float | int]:
        def ratio(a: int, b: int) -> float:
            return round(a / b, 3) if b else float("nan")

        return {"facts_precision": ratio(self.got_right, self.got), "facts_recall": ratio(self.want_found, self.want),
                "sentences_with_facts_found": ratio(self.bearing_found, self.bearing),
                "dates_right": ratio(self.dated_right, self.dated),
                "endings_precision": ratio(self.ended_right, self.ended),
                "endings_recall": ratio(self.want_ended_found, self.want_ended),
                "collateral_endings": self.collateral, "facts_extracted": self.got, "facts_gold": self.want,
                **{f"recall_{t}": ratio(self.tier_found.get(t, 0), self.tier_want[t]) for t in TIERS
                   if self.tier_want.get(t)},
                **({"consistency": _consistency(self.phrasings)} if self.phrasings else {}),
                **{f"endings_recall_{t}": ratio(self.tier_ends_found.get(t, 0), self.tier_ends[t]) for t in TIERS
                   if self.tier_ends.get(t)},
                **({"endings_consistency": _consistency(self.change_phrasings)} if self.change_phrasings else {}),
                "keeps_ended": self.kept_ended, "ends_raised_confidence": self.raised}


def _consistency(phrasings: dict[str, list[bool]]) -> float:
    """The mean, over facts (or changes), of the share of their phrasings that yield them."""
    return round(sum(sum(v) / len(v) for v in phrasings.values()) / len(phrasings), 3)
