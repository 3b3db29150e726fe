"""The regex rules: the first offline extractor, kept as a precise layer and as the extraction bench's baseline.

Why rules: a handful of precise patterns for the statements people make about
themselves (moves, switches, decisions, preferences, work) is right far more
often than a guess. They miss most of ordinary talk, which is why the parser
extractor (`extract_parse`) is the default and uses these as one layer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from mnemobus.engine.extract import (
    ExtractedFact, Extraction, Speaker, entities_of, episode_speaker, speaker_lines,
)
from mnemobus.engine.relations import one_value
from mnemobus.store.model import EdgeType, Episode

SPEAKER = "\x00speaker"  # first person while the rules run; the message's speaker replaces it

_TECH = frozenset(
    """vim neovim emacs vscode vs code helix nano sublime intellij pycharm postgres postgresql pgvector mysql sqlite
    redis mongodb neo4j kafka nats rabbitmq docker kubernetes k8s python rust go golang java javascript typescript
    node node.js react vue svelte django flask fastapi rails linux macos windows ubuntu debian arch typesense
    elasticsearch opensearch qdrant faiss aws gcp azure terraform ansible git github gitlab zsh bash fish tmux""".split()
)

_FIRST_PERSON = {"i": SPEAKER, "we": SPEAKER, "my team": SPEAKER, "our team": SPEAKER, "me": SPEAKER}
_NOT_NAMES = frozenset(
    """this that it there here what which who when where why how these those they he she you yesterday today
    tomorrow also then so but and or if the a an my our your their his her its well yes no ok okay please
    thanks hi hello hey now lately recently""".split()
)

_SUBJ = r"(?P<s>\b(?:I|[Ww]e|[Mm]y team|[Oo]ur team)\b|\b[A-Z][\w.+#-]*(?:\s+[A-Z][\w.+#-]*){0,3})"
_STOP = (
    r"(?=\s+(?:and|but|because|since|as|for|at|in|on|with|when|which|who|while|last|this|next|yesterday|today|now|"
    r"recently|instead|lately|ago|anymore|these|every|from|to|after|before|so|though|although)\b|\s*[,;:()\"]|\s*$)"
)
_OBJ = r"(?P<o>[\w.+#'/-]+(?:\s+[\w.+#'/-]+){0,5}?)" + _STOP
_A = r"(?P<a>[\w.+#'/-]+(?:\s+[\w.+#'/-]+){0,4}?)"
_B = r"(?P<b>[\w.+#'/-]+(?:\s+[\w.+#'/-]+){0,4}?)" + _STOP
_BE = r"(?:\s+(?:am|is|are|was|were|have been|has been|'m|'re|'s))?"
_ADV = r"(?:\s+(?:just|recently|finally|now|also|really|still|actually|mostly|usually|always))?"


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    build: Callable[[str, re.Match[str]], list[ExtractedFact]]


def _clean(phrase: str) -> str:
    phrase = phrase.strip(" .,'\"")
    phrase = re.sub(r"^(?:the|a|an|my|our|his|her|their|using|to)\s+", "", phrase, flags=re.IGNORECASE).strip()
    # a lone function word names nothing ("Yeah, I love to." is no liking of "to"), nor does a phrase that
    # opens with a preposition ("which I use for peace": the object was before the verb)
    first = phrase.split(" ", 1)[0].lower()
    return "" if phrase.lower() in _NOT_NAMES or first in ("to", "of", "for", "with", "in", "on", "at", "about",
                                                           "from", "by") else phrase


def _kind(name: str, default: str) -> str:
    return "technology" if name.lower() in _TECH else default


def _fact(subject: str, relation: str, obj: str, edge: EdgeType, sentence: str, *, stype: str = "thing",
          otype: str = "thing", replaces: str | None = None, confidence: float = 0.8) -> ExtractedFact:
    return ExtractedFact(subject, relation, obj, edge, sentence, confidence, stype, _kind(obj, otype), replaces)


# one more item of a list after a matched object: ", tmux", ", and zsh", " and tea"
_LIST_ITEM = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+)(?P<o>[\w.+#'/-]+(?:\s+[\w.+#'/-]+){0,2}?)" + _STOP)
# words that show a list item is really the next clause ("... and I like tea", "... and love it")
_CLAUSE_WORDS = _NOT_NAMES | frozenset(
    """i we me am is are was were be been have has had do does did will would can could should love loves like likes
    hate hates use uses used think thinks want wants need needs live lives work works moved switched""".split()
)


def _list_items(m: re.Match[str]) -> list[str]:
    """The further items of a list that starts at the matched object; stops at anything that reads like a clause."""
    items: list[str] = []
    pos = m.end()
    while (nxt := _LIST_ITEM.match(m.string, pos)) is not None:
        item = _clean(nxt.group("o"))
        if not item or any(w.lower() in _CLAUSE_WORDS for w in item.split()):
            break
        items.append(item)
        pos = nxt.end()
    return items


def _verb_agrees(subject: str, m: re.Match[str]) -> bool:
    """"I like", "Josh likes"; not "Sounds like a plan", "Events like these": there `like` is no verb of the word
    before it, and a capitalised first word is no name."""
    verb = m.groupdict().get("verb")
    if verb is None:
        return True
    return (subject == SPEAKER) != verb.lower().endswith("s")


def _simple(relation: str, verb: str, edge: EdgeType, otype: str = "thing", stype: str = "thing"):  # noqa: ANN202
    """One fact per object; for relations that can hold several objects at once, one per item of a list."""
    listable = not one_value(relation)

    def build(subject: str, m: re.Match[str]) -> list[ExtractedFact]:
        obj = _clean(m.group("o"))
        if not obj or not _verb_agrees(subject, m):
            return []
        st = "person" if subject == SPEAKER else stype
        objects = [obj, *(_list_items(m) if listable else [])]
        return [_fact(subject, relation, o, edge, f"{subject} {verb} {o}", stype=st, otype=otype) for o in objects]

    return build


def _move(subject: str, m: re.Match[str]) -> list[ExtractedFact]:
    a, b = _clean(m.group("a")), _clean(m.group("b"))
    if not a or not b:
        return []
    if a.lower() in _TECH or b.lower() in _TECH:
        return _switch(subject, m)
    st = "person" if subject == SPEAKER else "thing"
    return [_fact(subject, "lives_in", b, "temporal", f"{subject} lives in {b} (moved from {a})", stype=st,
                  otype="place", replaces=a)]


def _switch(subject: str, m: re.Match[str]) -> list[ExtractedFact]:
    a, b = _clean(m.group("a")), _clean(m.group("b"))
    if not a or not b:
        return []
    st = "person" if subject == SPEAKER else "thing"
    return [_fact(subject, "uses", b, "temporal", f"{subject} uses {b} (switched from {a})", stype=st, replaces=a)]


def _replaced(subject: str, m: re.Match[str]) -> list[ExtractedFact]:
    return _switch(subject, m)


def _decided(subject: str, m: re.Match[str]) -> list[ExtractedFact]:
    obj = _clean(m.group("o"))
    if not obj:
        return []
    verb = m.group("v").lower()
    st = "person" if subject == SPEAKER else "thing"
    return [_fact(subject, "decided_to_adopt", obj, "causal", f"{subject} decided to {verb} {obj}", stype=st)]


def _rule(pattern: str, build: Callable[[str, re.Match[str]], list[ExtractedFact]]) -> _Rule:
    return _Rule(re.compile(pattern), build)


_RULES: tuple[_Rule, ...] = (
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:moved|relocated)\s+from\s+" + _A + r"\s+to\s+" + _B, _move),
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:switched|migrated|changed|went|moved over)\s+from\s+" + _A + r"\s+to\s+" + _B,
          _switch),
    _rule(_SUBJ + _BE + _ADV + r"\s+replaced\s+" + _A + r"\s+with\s+" + _B, _replaced),
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:decided|agreed|chose|have decided|are going)\s+to\s+(?P<v>adopt|use|go with|"
          r"switch to|migrate to|move to)\s+" + _OBJ, _decided),
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:moved|relocated)\s+to\s+" + _OBJ, _simple("lives_in", "lives in", "semantic", "place")),
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:live|lives|living|based|located|residing)\s+in\s+" + _OBJ,
          _simple("lives_in", "lives in", "semantic", "place")),
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:work|works|working)\s+on\s+" + _OBJ,
          _simple("works_on", "works on", "semantic", "project", "person")),
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:work|works|working|employed)\s+(?:at|for)\s+" + _OBJ,
          _simple("works_at", "works at", "hierarchical", "organization", "person")),
    _rule(_SUBJ + _ADV + r"\s+(?P<verb>prefer|prefers)\s+" + _OBJ, _simple("prefers", "prefers", "semantic", "concept", "person")),
    _rule(_SUBJ + _ADV + r"\s+(?P<verb>like|likes|love|loves|enjoy|enjoys)\s+" + _OBJ,
          _simple("likes", "likes", "semantic", "concept", "person")),
    _rule(_SUBJ + _ADV + r"\s+(?P<verb>hate|hates|dislike|dislikes)\s+" + _OBJ,
          _simple("dislikes", "dislikes", "semantic", "concept", "person")),
    _rule(_SUBJ + _BE + _ADV + r"\s+(?:use|uses|using)\s+" + _OBJ, _simple("uses", "uses", "semantic")),
    _rule(_SUBJ + _BE + r"\s+(?:built|written|running)\s+(?:on|with|in)\s+" + _OBJ, _simple("uses", "uses", "semantic")),
    _rule(_SUBJ + r"\s+(?:runs|run)\s+on\s+" + _OBJ, _simple("uses", "uses", "semantic")),
    _rule(_SUBJ + _ADV + r"\s+(?:depend|depends)\s+on\s+" + _OBJ, _simple("depends_on", "depends on", "causal")),
    _rule(_SUBJ + r"\s+(?:is|are)\s+(?:a\s+)?part\s+of\s+" + _OBJ, _simple("part_of", "is part of", "hierarchical")),
    _rule(_SUBJ + r"\s+(?:belongs|belong)\s+to\s+" + _OBJ, _simple("part_of", "is part of", "hierarchical")),
    _rule(_SUBJ + _ADV + r"\s+(?:manage|manages|lead|leads)\s+" + _OBJ,
          _simple("manages", "manages", "hierarchical", "thing", "person")),
    _rule(_SUBJ + _BE + r"\s+married\s+to\s+" + _OBJ, _simple("is_married_to", "is married to", "semantic", "person", "person")),
    _rule(_SUBJ + r"\s+reports?\s+to\s+" + _OBJ, _simple("reports_to", "reports to", "hierarchical", "person", "person")),
)

_CHANGE_RULES = _RULES[:4]
_NAME_IS = re.compile(r"\b(?i:my name is|call me|i am called|i'm called)\s+(?P<n>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)")
_SENTENCES = re.compile(r"(?<=[.!?;\n])\s+|\n+")


def _subject(raw: str) -> str | None:
    key = raw.strip().lower()
    if key in _FIRST_PERSON:
        return _FIRST_PERSON[key]
    words = raw.split()
    while words and words[0].lower() in _NOT_NAMES:
        words = words[1:]
    if not words:
        return None
    return " ".join(words)


_DAYS_PER = {"day": 1, "week": 7, "month": 30, "year": 365}
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10, "a couple of": 2, "a few": 3}
_WHEN = re.compile(
    r"\b(?:(?P<yesterday>yesterday)|last\s+(?P<last>week|month|year)"
    r"|(?P<n>\d{1,3}|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
    r"(?P<unit>day|week|month|year)s?\s+ago)\b",
    re.IGNORECASE,
)


def took_effect_before(sentence: str) -> timedelta:
    """"I moved to London last month": the move is a month older than the message, and so is the end of the
    old fact it replaces. Past-relative phrases only; anything else (a date, "next week") is left at the message
    time rather than guessed."""
    m = _WHEN.search(sentence)
    if m is None:
        return timedelta(0)
    if m.group("yesterday"):
        return timedelta(days=1)
    if m.group("last"):
        return timedelta(days=_DAYS_PER[m.group("last").lower()])
    n = m.group("n").lower()
    count = int(n) if n.isdigit() else _COUNTS[re.sub(r"\s+", " ", n)]
    return timedelta(days=count * _DAYS_PER[m.group("unit").lower()])


def rule_facts(sentence: str, rules: tuple[_Rule, ...] | None = None) -> tuple[list[ExtractedFact], list[str]]:
    """The rules on one sentence: facts with first person as `SPEAKER` (`fact` sentences say "{SPEAKER} ..."),
    and the names the speaker gave themselves. `valid_from` is left unset; `took_effect_before` dates them."""
    facts: list[ExtractedFact] = []
    aliases: list[str] = []
    sentence = sentence.strip().rstrip(".!?;")
    if not sentence:
        return facts, aliases
    if (m := _NAME_IS.search(sentence)) is not None:
        aliases.append(m.group("n"))
    if took_effect_before(sentence):  # the time phrase said, it leaves the clause, so no object swallows it
        sentence = re.sub(r"\s+", " ", _WHEN.sub("", sentence)).strip(" ,")
    taken: list[tuple[int, int]] = []
    for rule in _RULES if rules is None else rules:
        for m in rule.pattern.finditer(sentence):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            subject = _subject(m.group("s"))
            if subject is None:
                continue
            built = [f for f in rule.build(subject, m) if f.object.lower() not in _NOT_NAMES]
            if built:
                taken.append((m.start(), m.end()))
                facts.extend(built)
    return facts, aliases


def change_facts(text: str) -> tuple[list[ExtractedFact], list[str]]:
    """Only the rules for changes ("moved from X to Y", "switched from X to Y", "replaced X with Y", "decided to
    adopt X"): they read both sides of a change precisely, which the parser extractor uses them for. First person
    is `SPEAKER`; also the names the speaker gave themselves."""
    facts: list[ExtractedFact] = []
    names: list[str] = []
    for sentence in _SENTENCES.split(text):
        found, said = rule_facts(sentence, _CHANGE_RULES)
        facts.extend(found)
        names.extend(said)
    return facts, names


def as_said_by(f: ExtractedFact, speaker: Speaker) -> ExtractedFact:
    """A rule's fact with first person replaced by the speaker's entity."""
    name = speaker.entity_name
    if f.subject != SPEAKER and f.object != SPEAKER:
        return f
    return replace(f, subject=name if f.subject == SPEAKER else f.subject,
                   object=name if f.object == SPEAKER else f.object, fact=f.fact.replace(SPEAKER, name),
                   subject_type=speaker.entity_type if f.subject == SPEAKER else f.subject_type)


def extract_text(text: str, speaker: Speaker = Speaker(), reference_time: datetime | None = None) -> Extraction:
    """The rules applied sentence by sentence (each line said by its speaker); the first rule that matches a clause
    wins it. A past time phrase dates the fact that long before `reference_time`."""
    facts: list[ExtractedFact] = []
    aliases: dict[str, list[str]] = {}
    speakers: dict[str, Speaker] = {}
    for said_by, line in speaker_lines(text, speaker):
        speakers.setdefault(said_by.entity_name, said_by)
        for sentence in _SENTENCES.split(line):
            found, names = rule_facts(sentence)
            aliases.setdefault(said_by.entity_name, []).extend(names)
            before = took_effect_before(sentence)
            for f in found:
                f = as_said_by(f, said_by)
                if before and reference_time is not None:
                    f = replace(f, valid_from=reference_time - before)
                facts.append(f)
    unique = tuple(dict.fromkeys(facts))
    named = {k: tuple(dict.fromkeys(v)) for k, v in aliases.items() if v}
    return Extraction(entities_of(unique, (), list(speakers.values()), named), unique)


class RulesExtractor:
    """The regex rules alone (the extraction bench's baseline)."""

    name = "offline-rules"

    async def extract(self, episode: Episode) -> Extraction:
        return extract_text(episode.content, episode_speaker(episode), episode.reference_time)
