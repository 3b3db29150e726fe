"""When a statement took effect: time phrases resolved against the message's reference time.

"in 2021", "in March", "on 14 June", "last month", "two weeks ago", "yesterday", "next quarter": a fact said
with one of these holds from that time, not from the moment it was said. Dates are resolved to the start of
the period they name (a month to its first day); a bare month or weekday is the latest one not after the
message for a statement in the past tense, the next one for a plan. Anything else is left to the message time.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WEEKDAYS = {d: i for i, d in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())}
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
           "thirty": 30, "forty": 40, "fifty": 50, "a couple of": 2, "a few": 3, "several": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365, "decade": 3650}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_COUNT = r"(?P<n>\d{1,3}|" + "|".join(sorted(_COUNTS, key=len, reverse=True)) + r")"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(p, re.IGNORECASE)) for name, p in (
    ("day_month", r"\b(?:on\s+)?(?:the\s+)?(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH
     + r"(?:,?\s+(?P<year>(?:19|20)\d\d))?\b"),
    ("month_day", r"\b(?:on\s+)?" + _MONTH + r"\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<year>(?:19|20)\d\d))?\b"),
    ("month_year", r"\b" + _MONTH + r"\s+(?P<year>(?:19|20)\d\d)\b"),
    ("year", r"\b(?:in|since|from|of|around|back in)\s+(?P<year>(?:19|20)\d\d)\b"),
    ("ago", r"\b" + _COUNT + r"\s+(?P<unit>day|week|month|year|decade)s?\s+ago\b"),
    ("yesterday", r"\byesterday\b"),
    ("tomorrow", r"\btomorrow\b"),
    ("last", r"\blast\s+(?P<unit>week|month|year|decade)\b"),
    ("next", r"\bnext\s+(?P<unit>week|month|year|quarter)\b"),
    ("this", r"\bthis\s+(?P<unit>quarter|year)\b"),
    ("season", r"\b(?P<rel>last|next|this|in the|in)\s+(?P<season>spring|summer|autumn|fall|winter)\b"),
    ("weekday", r"\b(?P<rel>last|next|on|this)\s+(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"),
    ("month", r"\b(?P<rel>in|last|next|since|this|by|from)\s+" + _MONTH + r"\b"),
    ("span", r"\bfor\s+(?:the\s+(?:past|last)\s+)?" + _COUNT + r"\s+(?P<unit>day|week|month|year|decade)s?\b"),
))

#: per pattern, the words one of which each of its matches holds as a whole word (followed by no letter or digit),
#: or A_DIGIT: each match holds a digit. A text holding none has no time phrase, so `resolve` and `time_phrase`
#: skip their searches: they run 2-3 times a line in the parser's rules (~22 us each) and most lines of talk name
#: no time. Every pattern is listed (tests/engine/test_when_guard.py); a new one must say what it needs here.
A_DIGIT: tuple[str, ...] = ()
_NEEDS: dict[str, tuple[str, ...]] = {
    "day_month": A_DIGIT, "month_day": A_DIGIT, "month_year": A_DIGIT, "year": A_DIGIT, "ago": ("ago",),
    "yesterday": ("yesterday",), "tomorrow": ("tomorrow",), "last": ("last",), "next": ("next",), "this": ("this",),
    "season": ("spring", "summer", "autumn", "fall", "winter"), "weekday": tuple(_WEEKDAYS),
    "month": tuple(_MONTHS),  # a month's name is followed by a dot or a boundary: "decided" is no December
    "span": ("for",),
}
_GUARD_WORDS = sorted({w for words in _NEEDS.values() for w in words}, key=len, reverse=True)
# led by the class of their first characters, so the regex engine skips every position none of them starts at
# (12 us a line without it, 3.5 with it)
_MAY_NAME_A_TIME = re.compile(r"(?=[\d" + "".join(sorted({w[0] for w in _GUARD_WORDS})) + r"])(?:\d|\b(?:"
                              + "|".join(_GUARD_WORDS) + r")(?!\w))", re.IGNORECASE)


def time_phrase(text: str) -> re.Match[str] | None:
    """The first time phrase in the text (the most specific kind when two overlap)."""
    if _MAY_NAME_A_TIME.search(text) is None:
        return None
    best: re.Match[str] | None = None
    for _, pattern in _PATTERNS:
        m = pattern.search(text)
        if m is not None and (best is None or m.start() < best.start()):
            best = m
    return best


def resolve(text: str, reference: datetime, *, future: bool = False, past: bool = False,
            perfect: bool = False) -> datetime | None:
    """The time the first time phrase in `text` names, against `reference`; None when there is none.

    `future` says the statement is a plan ("I'm moving in March"): a bare month or weekday is then the next
    one, not the last. `past`: told in the past tense, "on Saturday" is the last one (without a tense it is as
    often a habit). `perfect`: "I've been vegan for eight years" began eight years ago (a span in the simple past,
    "I lived there for eight years", says how long, not when)."""
    if _MAY_NAME_A_TIME.search(text) is None:
        return None
    for kind, pattern in _PATTERNS:
        m = pattern.search(text)
        if m is None or (kind == "span" and not perfect):
            continue
        try:
            when = _resolve(kind, m, reference, future, past)
        except OverflowError:  # "yesterday" said on 1 January of year 1: a time no calendar here holds
            when = None
        if when is not None:
            return when
    return None


def _resolve(kind: str, m: re.Match[str], ref: datetime, future: bool,  # noqa: PLR0911
             past: bool = False) -> datetime | None:
    day0 = ref.replace(hour=0, minute=0, second=0, microsecond=0)
    g = m.groupdict()
    if kind in ("day_month", "month_day"):
        month, day = _MONTHS[g["month"].lower()], int(g["day"])
        year = int(g["year"]) if g.get("year") else _year_for(month, ref, future, day)
        return _date(day0, year, month, day)
    if kind == "month_year":
        return _date(day0, int(g["year"]), _MONTHS[g["month"].lower()], 1)
    if kind == "year":
        return _date(day0, int(g["year"]), 1, 1)
    if kind in ("ago", "span"):
        n = g["n"].lower()
        count = int(n) if n.isdigit() else _COUNTS[re.sub(r"\s+", " ", n)]
        return day0 - timedelta(days=count * _UNIT_DAYS[g["unit"].lower()])
    if kind == "yesterday":
        return day0 - timedelta(days=1)
    if kind == "tomorrow":
        return day0 + timedelta(days=1)
    if kind == "last":
        return day0 - timedelta(days=_UNIT_DAYS[g["unit"].lower()])  # "last month": about a month before
    if kind == "next":
        unit = g["unit"].lower()
        if unit == "month":
            return _date(day0, day0.year + (day0.month == 12), 1 if day0.month == 12 else day0.month + 1, 1)
        if unit == "year":
            return _date(day0, day0.year + 1, 1, 1)
        if unit == "quarter":
            q = (day0.month - 1) // 3 + 1
            return _date(day0, day0.year + (q == 4), 1 if q == 4 else q * 3 + 1, 1)
        return day0 + timedelta(days=7)
    if kind == "this":
        if g["unit"].lower() == "year":
            return _date(day0, day0.year, 1, 1)
        return _date(day0, day0.year, (day0.month - 1) // 3 * 3 + 1, 1)
    if kind == "season":
        month, rel = _SEASONS[g["season"].lower()], g["rel"].lower()
        ahead = rel == "next" or (rel not in ("last",) and future)
        year = day0.year + 1 if rel == "next" and month <= day0.month else _year_for(month, ref, ahead)
        if rel == "last":
            year = day0.year - 1 if month >= day0.month else day0.year
        return _date(day0, year, month, 1)
    if kind == "weekday":
        target, rel = _WEEKDAYS[g["weekday"].lower()], g["rel"].lower()
        if rel == "on" and not future and not past:
            return None  # "on Fridays", "on Monday" with no tense to place it: a habit more often than a date
        delta = (target - day0.weekday()) % 7
        if rel == "next" or future:
            return day0 + timedelta(days=delta or 7)
        return day0 - timedelta(days=(day0.weekday() - target) % 7 or 7)
    if kind == "month":
        month, rel = _MONTHS[g["month"].lower()], g["rel"].lower()
        if rel == "last":
            year = day0.year - 1 if month >= day0.month else day0.year
        elif rel == "next":
            year = day0.year + 1 if month <= day0.month else day0.year
        else:
            year = _year_for(month, ref, future)
        return _date(day0, year, month, 1)
    return None


def _year_for(month: int, ref: datetime, future: bool, day: int = 1) -> int:
    """The year of the latest such month (and day) not after the reference; the next one for a plan."""
    if future:
        return ref.year if (month, day) >= (ref.month, ref.day) else ref.year + 1
    return ref.year if (month, day) <= (ref.month, ref.day) else ref.year - 1


def _date(day0: datetime, year: int, month: int, day: int) -> datetime | None:
    try:
        return day0.replace(year=year, month=month, day=day)
    except ValueError:
        return None
