"""The attribute ruler's matches found by dict look-ups instead of spaCy's Matcher.

Why: in the parser's pipeline the attribute ruler (the tag map and the model's exceptions, 179 rules of one or two
tokens, each token matched on its tag, lower-case form, dependency or whether it is a space) cost 0.18-0.20 ms a
line, as much as the parser itself, and almost all of it (0.19 of 0.20 ms) is the Matcher trying every rule at
every token; setting the attributes costs 0.01 ms. Each rule tests attributes the pipeline already set (an
equality, a set of values, a pattern), so a rule's first token can be looked up by one of its values (or, for a
first token with a pattern only, tried everywhere) and the rest checked directly. The
ruler still sets the attributes itself (`AttributeRuler.set_annotations`, its own code): only `match` is replaced,
and it returns the list spaCy's `match` returns, item for item (`tests/engine/test_attribute_index.py` compares
them on the extraction dev set and a LoCoMo conversation). A ruler with a rule this index cannot read (an
operator, another predicate, another attribute) keeps spaCy's Matcher.
"""

from __future__ import annotations

import re
from typing import Any

#: the token attributes a rule may test, in the order a rule's first token is indexed by (the most selective first)
_ATTRS = ("LOWER", "TAG", "DEP", "IS_SPACE")

_Row = tuple[str, str, str, bool]  # a token's LOWER, TAG, DEP, IS_SPACE
_Test = tuple[int, str, Any]  # (attribute's position in _ATTRS, "==" | "in" | "not in" | "re", value, set or pattern)
_Rule = tuple[int, int, tuple[tuple[_Test, ...], ...]]  # attr id, match id, each token's tests


class AttributeIndex:
    """One attribute ruler's rules, indexed by the values one attribute of their first token may have."""

    def __init__(self, rules: dict[tuple[int, Any], list[_Rule]], anywhere: list[_Rule]) -> None:
        self._rules = rules
        self._anywhere = anywhere  # rules whose first token has no value to look up (a pattern only): tried everywhere

    @classmethod
    def of(cls, ruler: Any) -> AttributeIndex | None:
        """The index of `ruler`'s rules (a spaCy AttributeRuler), or None when one of them tests something the
        index does not read as the Matcher does (then only the Matcher reads them right)."""
        strings = ruler.vocab.strings
        index: dict[tuple[int, Any], list[_Rule]] = {}
        anywhere: list[_Rule] = []
        for attr_id in range(len(ruler.attrs)):  # rule i is the Matcher's key str(i) (AttributeRuler.add)
            match_id = strings[str(attr_id)]
            for pattern in ruler.matcher.get(str(attr_id))[1]:
                tokens = tuple(_tests(spec) for spec in pattern) if isinstance(pattern, list) else None
                if not tokens or any(t is None for t in tokens):
                    return None
                rule: _Rule = (attr_id, match_id, tokens)  # type: ignore[assignment]
                keys = [(a, kind, v) for a, kind, v in tokens[0] if kind in ("==", "in")]  # type: ignore[union-attr]
                if not keys:
                    anywhere.append(rule)
                    continue
                a, kind, v = min(keys, key=lambda t: t[0])  # LOWER before TAG before DEP ...
                for value in (v if kind == "in" else (v,)):
                    index.setdefault((a, value), []).append(rule)
        return cls(index, anywhere)

    def match(self, doc: Any) -> list[tuple[int, int, int, int]]:
        """What `AttributeRuler.match` returns: (attr id, match id, start, end) of every rule matching, sorted."""
        rows: list[_Row] = [(t.lower_, t.tag_, t.dep_, t.is_space) for t in doc]
        rules, anywhere = self._rules, self._anywhere
        out: list[tuple[int, int, int, int]] = []
        n = len(rows)
        for i, row in enumerate(rows):
            for candidates in (rules.get((0, row[0]), ()), rules.get((1, row[1]), ()), rules.get((2, row[2]), ()),
                               rules.get((3, row[3]), ()), anywhere):
                for attr_id, match_id, tokens in candidates:
                    end = i + len(tokens)
                    if end <= n and all(_holds(rows[j][a], kind, v) for j, tests in enumerate(tokens, i)
                                        for a, kind, v in tests):
                        out.append((attr_id, match_id, i, end))
        out.sort()
        return out


def _tests(spec: Any) -> tuple[_Test, ...] | None:
    """One pattern token's tests, or None when it holds something else (an operator, another attribute or
    predicate)."""
    if not isinstance(spec, dict) or not spec:
        return None
    out: list[_Test] = []
    for key, value in spec.items():
        if key not in _ATTRS:
            return None
        kind: type = bool if key == "IS_SPACE" else str
        a = _ATTRS.index(key)
        if type(value) is kind:
            out.append((a, "==", value))
        elif kind is str and isinstance(value, dict) and len(value) == 1 and next(iter(value)) in (
                "IN", "NOT_IN") and all(type(v) is str for v in next(iter(value.values()))):
            op, values = next(iter(value.items()))
            out.append((a, "in" if op == "IN" else "not in", frozenset(values)))
        elif kind is str and isinstance(value, dict) and len(value) == 1 and type(value.get("REGEX")) is str:
            out.append((a, "re", re.compile(value["REGEX"])))
        else:
            return None
    return tuple(out)


def _holds(actual: Any, kind: str, value: Any) -> bool:
    """The Matcher's predicates: equal, in the set, not in it, the pattern found in the value (`re.search`)."""
    if kind == "==":
        return bool(actual == value)
    if kind == "in":
        return actual in value
    if kind == "not in":
        return actual not in value
    return value.search(actual) is not None


def index_attribute_ruler(nlp: Any) -> bool:
    """Replace the pipeline's attribute ruler's `match` with the index's, where every rule can be indexed; True
    when it was."""
    if "attribute_ruler" not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe("attribute_ruler")
    index = AttributeIndex.of(ruler)
    if index is None:
        return False
    ruler.match = index.match
    return True
