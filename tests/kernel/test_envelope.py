import json

from hypothesis import given
from hypothesis import strategies as st

from mnemobus.shared.envelope import EpisodeMessage, SkillRequest


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


def test_an_episode_carries_its_speakers_name_in_camel_case():
    episode = EpisodeMessage(episode_id="e1", group_id="g", content="hi", source_message_id="m1", speaker_name="Anna")
    wire = json.loads(episode.to_wire())
    assert wire["speakerName"] == "Anna" and EpisodeMessage.model_validate(wire).speaker_name == "Anna"


def test_an_episode_from_an_older_publisher_has_no_speaker_name():
    old = {"v": 1, "episodeId": "e1", "groupId": "g", "content": "hi", "sourceMessageId": "m1", "role": "user"}
    assert EpisodeMessage.model_validate(old).speaker_name is None
