from hypothesis import given
from hypothesis import strategies as st

import pytest

from mnemobus.shared.groups import (GROUP_ID_RE, InvalidGroupId, agent_user_group, sanitize_segment, system_group,
                             unknown_user_group, user_group, validate_group_id)


def test_known_user_group_is_user_underscore_id():
    assert user_group("josh") == "user_josh"


def test_unknown_user_group_joins_platform_and_platform_id():
    assert unknown_user_group("discord", "123456789") == "user_discord_123456789"


def test_per_agent_group_uses_double_underscore():
    assert agent_user_group("ava", user_group("josh")) == "agent_ava__user_josh"


def test_system_actor_group_keeps_dashes():
    assert system_group("pr-remediator") == "system_pr-remediator"


@pytest.mark.parametrize("bad", ["user:josh", "user/josh", "", "a b", "ü", "x" * 129])
def test_validate_group_id_refuses_unsafe_ids_with_a_reason(bad):
    with pytest.raises(InvalidGroupId) as exc:
        validate_group_id(bad)
    assert str(exc.value)


def test_validate_group_id_names_the_offending_character():
    with pytest.raises(InvalidGroupId, match="':'"):
        validate_group_id("user:josh")


@given(st.text(min_size=0, max_size=200))
def test_sanitised_segment_is_always_safe(raw):
    assert GROUP_ID_RE.fullmatch(system_group(raw))


@given(st.text(max_size=80), st.text(max_size=80))
def test_different_inputs_never_share_a_sanitised_segment(a, b):
    if a != b:
        assert sanitize_segment(a) != sanitize_segment(b)


def test_sanitising_is_deterministic():
    assert system_group("ceremony.security:triage") == system_group("ceremony.security:triage")


def test_segment_with_underscore_cannot_collide_with_group_structure():
    # "a_b" as a platform id must not look like platform "a" + id "b"
    assert unknown_user_group("x", "a_b") != unknown_user_group("x_a", "b")
