import os
import time

import pytest

from mnemobus.shared.errors import ConfigError
from mnemobus.shared.identity import IdentityRegistry, load_users


def test_known_user_reads_and_writes_shared_and_per_agent_groups(users_file):
    r = IdentityRegistry(users_file).resolve("discord", "111", "ava", None)
    assert r.groups == ("user_josh", "agent_ava__user_josh") and r.reason == "known_user"


def test_unknown_user_gets_the_platform_fallback_group(users_file):
    r = IdentityRegistry(users_file).resolve("discord", "42", "ava", None)
    assert r.groups == ("user_discord_42", "agent_ava__user_discord_42")


def test_memory_disabled_user_gets_no_groups(users_file):
    r = IdentityRegistry(users_file).resolve("discord", "999", "ava", None)
    assert r.groups == () and r.reason == "memory_disabled"


def test_event_without_user_or_system_actor_skips_memory(users_file):
    assert IdentityRegistry(users_file).resolve("cron", None, "ava", None).groups == ()


def test_system_actor_uses_the_system_group_only(users_file):
    r = IdentityRegistry(users_file).resolve("cron", None, "ava", "pr-remediator")
    assert r.groups == ("system_pr-remediator",)


def test_numeric_platform_id_is_refused_with_a_hint_to_quote_it(tmp_path):
    f = tmp_path / "u.yaml"
    f.write_text("users:\n  - id: a\n    identities:\n      discord: 123\n")
    with pytest.raises(ConfigError, match="quote"):
        load_users(f)


def test_duplicate_canonical_ids_are_refused(tmp_path):
    f = tmp_path / "u.yaml"
    f.write_text("users:\n  - id: a\n  - id: a\n")
    with pytest.raises(ConfigError, match="also used"):
        load_users(f)


def test_one_platform_id_cannot_belong_to_two_users(tmp_path):
    f = tmp_path / "u.yaml"
    f.write_text("users:\n  - id: a\n    identities: {discord: '1'}\n  - id: b\n    identities: {discord: '1'}\n")
    with pytest.raises(ConfigError, match="already belongs"):
        load_users(f)


def _touch_later(path):
    st = os.stat(path)
    os.utime(path, (st.st_atime + 5, st.st_mtime + 5))


def test_edited_users_file_takes_effect_on_reload(users_file):
    reg = IdentityRegistry(users_file)
    users_file.write_text("users:\n  - id: mara\n    identities: {discord: '111'}\n")
    _touch_later(users_file)
    assert reg.maybe_reload() is True
    assert reg.resolve("discord", "111", "ava", None).groups[0] == "user_mara"


def test_broken_edit_keeps_the_last_good_registry(users_file):
    outcomes = []
    reg = IdentityRegistry(users_file, on_reload=outcomes.append)
    users_file.write_text("users:\n  - id: 'not valid!'\n")
    _touch_later(users_file)
    assert reg.maybe_reload() is False
    assert reg.resolve("discord", "111", "ava", None).groups[0] == "user_josh"
    assert outcomes == ["rejected"]


def test_shipped_users_file_is_valid():
    assert "josh" in IdentityRegistry("workspace/users.yaml").users
