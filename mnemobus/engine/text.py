"""Text rules shared by every backend: name normalisation, query terms, injection markers."""

from __future__ import annotations

import re
import unicodedata

MAX_NAME_CHARS = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")
_SPACES = re.compile(r"\s+")
_WORD = re.compile(r"\w+", re.UNICODE)

STOPWORDS = frozenset(
    """a an and are as at be but by did do does for from had has have he her him his how i if in into is it its
    me my of on or our she so than that the their them then there these they this to was we were what when where
    which who whom why will with you your yours about does did can could would should tell know any some all""".split()
)


def normalise_name(name: str) -> str:
    """The canonical form an alias is looked up by: NFKC, no control characters, trimmed, lowercased, capped."""
    text = unicodedata.normalize("NFKC", name)
    text = _CONTROL.sub(" ", text)
    text = _SPACES.sub(" ", text).strip().lower()
    return text[:MAX_NAME_CHARS].strip()


def display_name(name: str) -> str:
    """The surface form shown to people: control characters removed, whitespace collapsed, capped."""
    text = _SPACES.sub(" ", _CONTROL.sub(" ", name)).strip()
    return text[:MAX_NAME_CHARS].strip()


def query_terms(text: str, limit: int = 16) -> list[str]:
    """Distinct lowercased words worth matching: stopwords and one-letter words dropped, order kept."""
    words = [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOPWORDS]
    return list(dict.fromkeys(words))[:limit]


_INJECTION = re.compile(
    r"ignore\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier)\s+(?:instructions|prompts?|messages?)"
    r"|disregard\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|earlier|your)\s+\w+"
    r"|forget\s+(?:all\s+)?(?:your|previous|prior)\s+instructions"
    r"|you\s+are\s+now\s+(?:a|an|in)\b"
    r"|(?:reveal|print|show)\s+(?:me\s+)?(?:your|the)\s+system\s+prompt"
    r"|new\s+system\s+prompt|<\|im_start\|>|<\|im_end\|>|<\|system\|>|\[/?INST\]|<<SYS>>|<\s*/?\s*system\s*>"
    r"|###\s*(?:system|instruction)s?\s*:|\bjailbreak\b|\bDAN\s+mode\b",
    re.IGNORECASE,
)


def has_injection_markers(text: str) -> bool:
    """Why screen: text that tries to steer the model must not become remembered 'facts' about the user."""
    return _INJECTION.search(text) is not None
