"""The endpoint parses with pydantic's JSON parser and falls back to the careful parse for what it refuses: the
two must give every message the same answer, accepted as the same model or refused for the same reason."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemobus.bus.endpoint import parse_message, reported_parse
from mnemobus.shared.envelope import EnrichedRequest, EpisodeMessage, SkillRequest
from mnemobus.shared.errors import InvalidMessage

REQUEST = {"v": 1, "id": "r1", "source": {"interface": "discord", "userId": "111", "channelId": "c"},
           "payload": {"skill": "chat", "content": "hi", "meta": {"agentId": "a1"}},
           "timestamp": "2026-11-29T00:00:00Z"}
EPISODE = {"episodeId": "e1", "groupId": "user_josh", "content": "hi", "sourceMessageId": "m1"}
MODELS = [(SkillRequest, REQUEST), (EnrichedRequest, REQUEST), (EpisodeMessage, EPISODE)]

# the values where the two parsers could part: surrogates (lone or paired), control characters, numbers past
# what Python converts, NaN and the infinities, large floats, deep nesting
edge_text = st.text(st.characters(codec=None, categories=None), max_size=8) | st.sampled_from(
    ["\ud800", "\udc00", "\ud83d\ude00", "a\x00b", "\ufeff", "\u2028"])
leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | edge_text
value = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(edge_text, inner, max_size=3),
                     max_leaves=8)


@st.composite
def messages(draw: st.DrawFn) -> tuple[type, bytes]:
    model, base = draw(st.sampled_from(MODELS))
    doc = json.loads(json.dumps(base))
    for key in draw(st.lists(st.sampled_from(sorted(doc) + ["extra", "userId"]), max_size=3)):
        if draw(st.booleans()):
            doc.pop(key, None)
        else:
            doc[key] = draw(value)
    if draw(st.booleans()) and isinstance(doc.get("source"), dict):
        doc["source"]["userId"] = draw(value)
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()), allow_nan=True)
    data = text.encode("utf-8", "surrogatepass")
    cut = draw(st.sampled_from(["none", "bom", "truncate", "byte", "nest", "digits"]))
    if cut == "bom":
        data = "\ufeff".encode() + data
    elif cut == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif cut == "byte":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at:]
    elif cut == "nest":
        depth = draw(st.integers(150, 1100))
        data = data[:-1] + b', "deep": ' + b"[" * depth + b"]" * depth + b"}"
    elif cut == "digits":  # around the 4,300 digits past which Python will not convert an integer
        data = data[:-1] + b', "n": ' + b"9" * draw(st.integers(4290, 4310)) + b"}"
    return model, data


def outcome(parse, model: type, data: bytes) -> tuple:  # type: ignore[no-untyped-def,type-arg]
    try:
        parsed = parse(model, data)
    except InvalidMessage as exc:
        return ("refused", exc.reason, str(exc))
    # a field the message left out takes a fresh default (a new id, the time now): those differ call to call
    fresh = {name for name, f in model.model_fields.items()
             if f.default_factory is not None and name not in parsed.model_fields_set}
    return ("accepted", repr(parsed.model_dump(exclude=fresh)))


@settings(max_examples=400, deadline=None)
@given(messages())
def test_the_fast_parse_and_the_careful_parse_give_every_message_the_same_answer(message):
    model, data = message
    assert outcome(lambda m, d: parse_message(m, d, 1 << 20), model, data) == outcome(reported_parse, model, data)


def test_a_lone_surrogate_is_refused_as_invalid_unicode_not_as_malformed_json():
    data = json.dumps({**REQUEST, "note": "\ud800"}).encode()
    assert outcome(lambda m, d: parse_message(m, d, 1 << 20), SkillRequest, data)[1] == "invalid_unicode"


def test_a_message_only_the_careful_parse_reads_is_still_accepted():
    data = "\ufeff".encode() + json.dumps(REQUEST).encode()  # a byte-order mark: pydantic's parser refuses it
    assert parse_message(SkillRequest, data, 1 << 20).payload.content == "hi"
