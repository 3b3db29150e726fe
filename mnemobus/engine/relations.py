"""The canonical relations: what each means, how many values it holds at a time, its other names, and what ends it.

Why a table: current truth depends on knowing that "Kemi is my wife", "I'm married to Kemi" and "Kemi is Lotte's
spouse" are one fact, that a person lives in one place at a time, and that "divorced", "split up" or "passed away"
end it. Written as branches, each such rule covered only the verb form it was written for ("gave up being vegan"
ended `be` while the fact was stored as `is`). Here every relation an extractor (the parser, the regex rules, an
LLM, a Graphiti client) names is mapped to one row, in one direction, before it is stored or compared, so an
ending finds the fact it ends whatever words either used, and a new value of a one-value relation ends the old.

Data, the look-ups over it (`canonical`, `one_value`, `ender`), and `canonical_extraction`, which ingest applies
to every extractor's output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from mnemobus.engine.extract import ExtractedEnding, ExtractedFact, Extraction


@dataclass(frozen=True, slots=True)
class Relation:
    """One canonical relation. `synonyms` say it the same way round, `inverses` from the object's end ("X wife_of Y"
    is "Y is_married_to X"); `values` carve a relation out of a generic one by its object ("is vegan" is a diet)."""

    name: str
    meaning: str
    subject: str
    object: str
    one_value: bool  # a subject holds one object at a time: a new one ends the old
    synonyms: tuple[str, ...] = ()
    inverses: tuple[str, ...] = ()
    symmetric: bool = False  # "A married to B" is "B married to A"
    values: frozenset[str] = frozenset()  # objects of a generic relation ("is") that make it this one
    examples: tuple[str, ...] = ()  # other ways to say it, for the semantic fallback (engine/relation_meaning.py)
    # one value per qualifier: a value said for something ("ramipril for hypertension") ends the old value
    # for the same thing only; one said for nothing, or for something else ("also metformin for diabetes"), ends
    # nothing. Meant for a relation that holds many values, one per purpose (takes_medication per condition)
    per_qualifier: bool = False


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_DIETS = _words("vegan vegetarian pescatarian pescetarian keto paleo carnivore flexitarian omnivore halal kosher "
                "gluten-free dairy-free teetotal sober")
_MARITAL = _words("married single divorced widowed engaged separated")
_WORK_STATES = _words("retired unemployed self-employed freelance")
# uses_<kind>: what someone uses of a kind of thing, one at a time ("I use a Kobo now" ends the Kindle): the kind,
# the nouns that name it ("my browser is Firefox") and the names that make a generic "uses"/"owns"/"has" this kind
USES_KINDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    kind: (_words(nouns), _words(names)) for kind, nouns, names in (
        ("phone", "phone smartphone",
         "iphone pixel galaxy samsung android nokia motorola oneplus xiaomi huawei fairphone blackberry"),
        ("ereader", "e-reader ereader", "kindle kobo nook remarkable"),
        ("laptop", "laptop", "macbook thinkpad chromebook"),
        ("browser", "browser", "firefox chrome safari brave opera vivaldi"),
        ("os", "os", "linux ubuntu macos debian fedora"),
        ("watch", "watch smartwatch", "fitbit garmin"),
        ("music_service", "", "spotify tidal deezer"),
        ("bank", "bank", "monzo revolut starling"),
    )}

RELATIONS: tuple[Relation, ...] = (
    # -- one value at a time ---------------------------------------------------------------------------------
    Relation("lives_in", "the place someone lives now", "person", "place", True,
             ("resides_in", "based_in", "lives_at", "live_in", "home_is", "moved_to", "living_in"),
             examples=("resides", "dwells in", "makes a home in", "is settled in", "has a house in")),
    Relation("works_at", "the organisation someone works for now", "person", "organization", True,
             ("works_for", "employed_at", "employed_by", "job_at", "works_in_company"), ("employs", "employer_of"),
             examples=("is employed at", "is on the staff of", "earns a living at", "has a job with",
                       "is hired by")),
    Relation("works_as", "someone's job title or occupation now", "person", "concept", True,
             ("job_title", "is_a_job", "job", "occupation", "profession", "works_as_a"),
             examples=("earns a living as", "is by profession", "trained and works as")),
    Relation("is_married_to", "the person someone is married to", "person", "person", True,
             ("married_to", "spouse", "has_spouse", "has_wife", "has_husband"),
             ("wife_of", "husband_of", "spouse_of"), symmetric=True),
    Relation("engaged_to", "the person someone is engaged to", "person", "person", True,
             ("is_engaged_to", "has_fiance", "has_fiancee"), ("fiance_of", "fiancee_of"), symmetric=True),
    Relation("partner_of", "the person someone is in a relationship with", "person", "person", True,
             ("dating", "is_dating", "in_a_relationship_with", "has_partner", "has_girlfriend", "has_boyfriend"),
             ("girlfriend_of", "boyfriend_of"), symmetric=True,
             examples=("is seeing", "goes out with", "is in love with")),
    Relation("reports_to", "someone's manager at work", "person", "person", True,
             ("has_manager", "has_boss", "managed_by", "has_team_lead", "has_supervisor"),
             ("manager_of", "boss_of", "team_lead_of", "supervisor_of", "line_manager_of"),
             examples=("answers to", "works under", "is supervised by")),
    Relation("diet", "the diet someone keeps", "person", "concept", True, ("follows_diet", "eats_diet"),
             values=_DIETS),
    Relation("marital_status", "whether someone is married, single, divorced", "person", "concept", True,
             values=_MARITAL),
    Relation("work_status", "retired, unemployed, self-employed", "person", "concept", True, values=_WORK_STATES),
    Relation("phone", "someone's phone number", "person", "concept", True, ("phone_number", "has_phone_number")),
    Relation("email", "someone's email address", "person", "concept", True, ("email_address", "has_email")),
    Relation("owns_car", "the car someone drives now", "person", "product", True, ("drives", "has_car", "car"),
             examples=("drives a car", "runs a car", "owns the car")),
    *(Relation(f"uses_{kind}", f"the {kind.replace('_', ' ')} someone uses now", "person", "product", True,
               ("phone_model",) if kind == "phone" else (), values=names) for kind, (_, names) in USES_KINDS.items()),
    Relation("studies_at", "where someone studies now", "person", "organization", True,
             ("student_at", "enrolled_at", "attends_university"),
             examples=("is a student at", "is studying at", "is enrolled in")),
    # -- many at a time --------------------------------------------------------------------------------------
    Relation("has_pet", "an animal someone keeps", "person", "pet", False, ("owns_pet", "pet"), ("pet_of",),
             examples=("keeps a pet", "looks after a dog", "owns a cat")),
    Relation("speaks", "a language someone speaks", "person", "concept", False, ("speaks_language",),
             examples=("is fluent in", "can speak", "talks in")),
    Relation("plays", "an instrument or game someone plays", "person", "concept", False, ("plays_instrument",)),
    Relation("likes", "something someone likes", "person", "concept", False,
             ("loves", "enjoys", "fan_of", "into", "adores", "is_fan_of"),
             examples=("cherishes", "relishes", "treasures", "is passionate about", "is keen on", "is crazy about")),
    Relation("dislikes", "something someone dislikes", "person", "concept", False, ("hates", "detests", "loathes"),
             examples=("despises", "abhors", "can't bear", "can't stand", "is not a fan of")),
    Relation("takes_medication", "a medicine or supplement someone takes", "person", "concept", False,
             ("takes", "on_medication", "prescribed", "is_on"),
             examples=("is prescribed", "is on tablets", "takes medicine", "takes pills"), per_qualifier=True),
    Relation("has_condition", "an illness or condition someone has", "person", "condition", False,
             ("suffers_from", "diagnosed_with"),
             examples=("lives with the illness", "was diagnosed with", "is ill with")),
    Relation("member_of", "a club, team or group someone belongs to", "person", "organization", False,
             ("belongs_to", "plays_in", "part_of_club"),
             examples=("is in the club", "plays for the team", "sings in the choir")),
    Relation("owns", "a thing someone owns", "person", "product", False, ("has_a", "bought")),
    Relation("smokes", "tobacco or vaping as a habit", "person", "concept", False, ("vapes",)),
    Relation("drinks", "a drink someone habitually drinks", "person", "concept", False),
    Relation("is", "a lasting state of someone (pregnant, deaf)", "person", "concept", False, ("be", "is_a_state")),
)
# families named by their kind: one value per kind ("favourite_show", "uses_phone")
ONE_VALUE_FAMILIES = ("favourite_", "favorite_", "uses_")
# relations the extractors name on purpose and mean as themselves: no table row, and never remapped by meaning (a
# visit is no home, a birthplace no address, a city one works in no employer)
OPEN_RELATIONS = frozenset("""visited plans_to_visit born_in from grew_up_in lives_with works_in allergic_to afraid_of
    studies learning teaches is_a is_an avoids collects runs has eats prefers wants attends attended moved_from
    lives_near works_near teaches_at went_to visits""".split())
# near a row's words, another meaning: the semantic fallback keeps a name whose nearest phrase is one of these
NOT_THE_SAME = ("lives near", "moved from", "used to live in", "visited", "travelled to", "was born in", "grew up in",
                "teaches at", "works near", "volunteers at", "rents", "stayed at", "misses", "met", "knows",
                "used to work at", "used to like")

_BY_NAME: dict[str, tuple[Relation, bool]] = {}
for _r in RELATIONS:
    _BY_NAME[_r.name] = (_r, False)
    for _s in _r.synonyms:
        _BY_NAME.setdefault(_s, (_r, False))
    for _i in _r.inverses:
        _BY_NAME.setdefault(_i, (_r, True))
_BY_VALUE: dict[str, Relation] = {v: r for r in RELATIONS for v in r.values}
_GENERIC = frozenset({"is", "be", "is_a_state", "works_as", "is_a", "uses", "owns", "has", "wears"})  # a value may specialise


def _key(relation: str) -> str:
    return relation.strip().lower().replace(" ", "_").replace("-", "_")


def canonical(relation: str, obj: str | None = None) -> tuple[str, bool]:
    """The canonical name of a relation as an extractor named it, and whether subject and object swap to say it
    that way round. An unknown relation is itself (lower-cased, underscored); "favorite" is spelt "favourite"."""
    key = _key(relation)
    if key.startswith("favorite_"):
        key = "favourite_" + key.removeprefix("favorite_")
    if obj is not None and key in _GENERIC and (by_value := _BY_VALUE.get(obj.strip().lower()) or _BY_VALUE.get(
            obj.strip().lower().split(" ")[0])) is not None:  # "Pixel 8" is a phone as "Pixel" is
        return by_value.name, False
    found = _BY_NAME.get(key) or _BY_NAME.get(_plain(key))
    if found is None:
        return key, False
    return found[0].name, found[1]


_FILLERS = ("currently_", "now_", "is_", "are_", "was_", "has_a_", "has_an_")


def _plain(key: str) -> str:
    """A relation name without the tense and filler words an LLM or a client adds: "is_currently_employed_at" is
    "employed_at", "lives_currently_in" is "lives_in"."""
    words = [w for w in key.split("_") if w not in ("currently", "now", "still", "presently")]
    key = "_".join(words)
    for filler in _FILLERS:
        if key.startswith(filler) and key.removeprefix(filler) in _BY_NAME:
            return key.removeprefix(filler)
    return key


def row(relation: str) -> Relation | None:
    """The table's row for a canonical relation name, if it has one."""
    found = _BY_NAME.get(_key(relation))
    return found[0] if found is not None else None


def one_value(relation: str) -> bool:
    """Does a subject hold one object of this (canonical) relation at a time?"""
    r = row(relation)
    return r.one_value if r is not None else relation.startswith(ONE_VALUE_FAMILIES)


def per_qualifier(relation: str) -> bool:
    """Does a subject hold one object of this (canonical) relation per qualifier ("for hypertension")?"""
    r = row(relation)
    return r is not None and r.per_qualifier


def symmetric(relation: str) -> bool:
    r = row(relation)
    return r is not None and r.symmetric


@dataclass(frozen=True, slots=True)
class Ender:
    """Words that end facts: the lemmas of the verb (with its particle) or phrase, and the relations they can end.
    `turned`: the clause's subject is the fact's object ("my dog Rex passed away" ends "I have_pet Rex");
    `bare`: it ends them without naming an object ("I retired" ends whatever job was held)."""

    phrase: str
    ends: tuple[str, ...]
    turned: bool = False
    bare: bool = False
    becomes: str | None = None  # the state it leaves its subject in ("retired"), kept as a fact
    # a state row ("single", "divorced"): `quiet` says the state itself is no fact worth keeping, only what it ends
    quiet: bool = False
    mutual: bool = False  # done to the speaker by the other one ("Priya dumped me", "he left me"): it ends too


ENDERS: tuple[Ender, ...] = (
    Ender("divorce", ("is_married_to",), bare=True, mutual=True),
    Ender("dump", ("partner_of", "engaged_to"), mutual=True),
    Ender("lose", ("works_at", "has_pet", "is_married_to", "partner_of")),
    Ender("hand in", ("works_at",)),
    Ender("separate", ("is_married_to", "partner_of", "engaged_to"), bare=True),
    Ender("break up", ("partner_of", "engaged_to", "is_married_to"), bare=True),
    Ender("split up", ("partner_of", "engaged_to", "is_married_to"), bare=True),
    Ender("split", ("partner_of", "engaged_to", "is_married_to"), bare=True),
    Ender("call off", ("engaged_to",), bare=False),
    Ender("retire", ("works_at", "works_as"), bare=True, becomes="retired"),
    Ender("resign", ("works_at", "works_as"), bare=True),
    Ender("quit", ("works_at", "member_of", "studies_at", "smokes", "drinks", "plays", "takes_medication", "diet")),
    Ender("leave", ("works_at", "member_of", "studies_at", "lives_in", "partner_of", "is_married_to"),
          mutual=True),
    Ender("last day", ("works_at", "studies_at")),
    Ender("lay off", ("works_at",), bare=True),
    Ender("let go", ("works_at",), bare=True),
    Ender("fire", ("works_at",), bare=True),
    Ender("graduate", ("studies_at",), bare=True),
    Ender("drop out", ("studies_at",)),
    Ender("move out", ("lives_in",), bare=True),
    Ender("move on", ("works_at", "partner_of", "member_of", "studies_at")),
    Ender("single", ("partner_of", "is_married_to", "engaged_to"), bare=True),
    Ender("divorced", ("is_married_to",), bare=True, quiet=True),
    Ender("widowed", ("is_married_to",), bare=True),
    Ender("unemployed", ("works_at", "works_as"), bare=True),
    Ender("retired", ("works_at", "works_as"), bare=True),
    Ender("move away", ("lives_in",)),
    Ender("sell", ("owns", "owns_car")),
    Ender("take off", ("takes_medication",)),
    Ender("come off", ("takes_medication",)),
    Ender("stop", ("takes_medication", "smokes", "drinks", "plays", "diet", "member_of")),
    Ender("give up", ("takes_medication", "smokes", "drinks", "plays", "diet", "member_of", "likes")),
    Ender("pass away", ("has_pet", "is_married_to", "partner_of"), turned=True),
    Ender("die", ("has_pet", "is_married_to", "partner_of"), turned=True),
    Ender("put down", ("has_pet",)),
    Ender("rehome", ("has_pet",)),
)
_ENDERS = {e.phrase: e for e in ENDERS}
# "Tom is my ex": the ties an ex no longer has with the speaker
EX_ENDS = ("partner_of", "is_married_to", "engaged_to")


def ender(phrase: str) -> Ender | None:
    """The ender row for a verb lemma with its particle ("break up", "retire"), if the table has one."""
    return _ENDERS.get(" ".join(phrase.lower().split()))


def _speakers(extraction: Extraction) -> frozenset[str]:
    return frozenset(e.name for e in extraction.entities if e.speaker_role is not None)


def canonical_fact(f: ExtractedFact, speakers: frozenset[str] = frozenset()) -> ExtractedFact:
    """The fact under its canonical relation, turned round when the name said it from the object's end; a symmetric
    relation is held by the speaker (a fixed end, so its ending finds it). The sentence keeps the words said."""
    name, turned = canonical(f.relation, f.object)
    if not turned and symmetric(name) and f.object in speakers and f.subject not in speakers:
        turned = True
    if turned:
        return replace(f, subject=f.object, object=f.subject, relation=name, subject_type=f.object_type,
                       object_type=f.subject_type)
    return f if name == f.relation else replace(f, relation=name)


def canonical_ending(e: ExtractedEnding, speakers: frozenset[str] = frozenset()) -> ExtractedEnding:
    """An ending under canonical relations (its alternatives too), turned like the fact it ends."""
    name, turned = canonical(e.relation, e.object)
    others = tuple(dict.fromkeys(canonical(r, e.object)[0] for r in e.relations))
    if e.object is not None and not turned and symmetric(name) and e.object in speakers \
            and e.subject not in speakers:
        turned = True
    if turned and e.object is not None:
        return replace(e, subject=e.object, object=e.subject, relation=name, relations=others,
                       subject_type=e.object_type, object_type=e.subject_type)
    return replace(e, relation=name, relations=others)


# the semantic fallback: (relation, object type) -> the canonical relation it means, or None (relation_meaning.py)
Meaning = Callable[[str, str], "str | None"]


def _by_meaning(f: ExtractedFact, meaning: Meaning | None) -> ExtractedFact:
    found = meaning(f.relation, f.object_type) if meaning is not None else None
    return f if found is None else replace(f, relation=found)


def canonical_extraction(extraction: Extraction, meaning: Meaning | None = None) -> Extraction:
    """Every fact and ending of an extraction under the table's relations (see `canonical_fact`); a fact whose
    relation the table does not know is read by `meaning`, when given, first."""
    speakers = _speakers(extraction)
    facts = tuple(dict.fromkeys(canonical_fact(_by_meaning(f, meaning), speakers) for f in extraction.facts))
    endings = tuple(dict.fromkeys(canonical_ending(e, speakers) for e in extraction.endings))
    return replace(extraction, facts=facts, endings=endings)
