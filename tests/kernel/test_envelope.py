import json

from hypothesis import given
from hypothesis import strategies as st

from mnemobus.envelope import SkillRequest


def _request(extra: dict | None = None) -> dict:
    body = {"payload": {"content": "hi", "meta": {"agentId": "ava"}}, "source": {"interface": "discord", "userId": "1"}}
    body.update(extra or {})
    return body


def test_unknown_top_level_fields_survive_a_round_trip():
    req = SkillRequest.model_validate(_request({"futureField": {"x": 1}}))
    assert json.loads(req.to_wire())["futureField"] == {"x": 1}


def test_unknown_meta_fields_survive_a_round_trip():
    body = _request()
    body["payload"]["meta"]["goalId"] = "g-7"
    req = SkillRequest.model_validate(body)
    assert json.loads(req.to_wire())["payload"]["meta"]["goalId"] == "g-7"


def test_request_carries_a_version():
    assert json.loads(SkillRequest.model_validate(_request()).to_wire())["v"] == 1


def test_trace_id_falls_back_to_request_id():
    req = SkillRequest.model_validate(_request())
    assert req.trace_id == req.id
    assert SkillRequest.model_validate(_request({"correlationId": "c1"})).trace_id == "c1"


@given(content=st.text(max_size=500), user=st.text(min_size=1, max_size=40))
def test_any_unicode_content_round_trips(content, user):
    body = _request()
    body["payload"]["content"] = content
    body["source"]["userId"] = user
    req = SkillRequest.model_validate(body)
    again = SkillRequest.model_validate_json(req.to_wire())
    assert again.payload.content == content and again.source.user_id == user
