"""Hard delete of a user: every group, cascading, in the store and on the bus; an audit event without content."""

from __future__ import annotations

import json

import pytest
from nats.js.errors import NotFoundError

from mnemobus.shared import subjects
from mnemobus.shared.groups import GroupId
from mnemobus.shared.config import ApiSettings
from pydantic import SecretStr

from mnemobus.api.core import MemoryService
from mnemobus.api.service import check_key_owners
from mnemobus.shared.config import ApiKey
from mnemobus.shared.errors import ConfigError
from tests.api.conftest import ADMIN_KEY, ANA_KEY, SHARED_KEY, Api, keyed_api_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def api_config() -> ApiSettings:
    return keyed_api_config()

JOSH_GROUPS = ("user_josh", "agent_echo__user_josh", "user_discord_111")


async def _josh_everywhere(api: Api) -> None:
    for group in JOSH_GROUPS:
        await api.say(group, "I live in Berlin. I work at Acme.")
    await api.say("user_ana", "I work at Globex.")


async def test_hard_delete_leaves_nothing_of_the_user_in_the_store(api: Api) -> None:
    await _josh_everywhere(api)
    body, headers = await api.nats("delete-user", {"user_id": "josh", "actor": "josh"})
    assert "Nats-Service-Error-Code" not in headers, headers
    for group in JOSH_GROUPS:
        assert (await api.store.count_episodes(group), await api.store.count_facts(group)) == (0, 0)
        assert await api.rt.engine.search_entities(GroupId(group), "Acme") == []
    assert (body["episodes"], body["facts"], body["remaining"]) == (3, 6, 0)


async def test_hard_delete_leaves_no_queued_episode_of_the_user_on_the_bus(api: Api) -> None:
    await _josh_everywhere(api)
    await api.nats("delete-user", {"user_id": "josh", "actor": "josh"})
    for group in JOSH_GROUPS:
        with pytest.raises(NotFoundError):
            await api.rt.bus.js.get_last_msg(subjects.EPISODE_STREAM, subjects.episode(GroupId(group)))


async def test_hard_delete_keeps_other_users_memory(api: Api) -> None:
    await _josh_everywhere(api)
    await api.nats("delete-user", {"user_id": "josh", "actor": "josh"})
    facts = (await api.http.post("/search", json={"query": "Globex Acme Berlin", "max_facts": 10},
                                   headers=api.auth)).json()["facts"]
    assert sorted(f["fact"] for f in facts) == ["I work at Globex.", "tester works at Globex"]


async def test_hard_delete_publishes_an_audit_event_with_counts_and_no_content(api: Api) -> None:
    await _josh_everywhere(api)
    sub = await api.rt.bus.nc.subscribe("memory.audit.>")
    await api.nats("delete-user", {"user_id": "josh", "actor": "josh"})
    msg = await sub.next_msg(timeout=5)
    event = json.loads(msg.data)
    assert (event["actor"], event["subjectUser"], event["episodes"]) == ("josh", "josh", 3)
    assert sorted(event["groups"]) == sorted(JOSH_GROUPS)
    assert b"Berlin" not in msg.data and b"Acme" not in msg.data


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_hard_delete_by_a_non_admin_is_403_and_erases_nothing(api: Api) -> None:
    await _josh_everywhere(api)
    _, headers = await api.nats("delete-user", {"user_id": "josh"}, headers=_bearer(ANA_KEY))
    assert headers["Nats-Service-Error-Code"] == "403" and "'ana' is not an admin" in headers["Nats-Service-Error"]
    assert await api.store.count_episodes(GroupId("user_josh")) == 1


async def test_over_nats_the_actor_is_the_keys_owner_and_the_audit_names_them(api: Api) -> None:
    await _josh_everywhere(api)
    sub = await api.rt.bus.nc.subscribe("memory.audit.>")
    body, headers = await api.nats("delete-user", {"user_id": "ana"}, headers=_bearer(ADMIN_KEY))
    event = json.loads((await sub.next_msg(timeout=5)).data)
    assert "Nats-Service-Error-Code" not in headers, headers
    assert (body["actor"], body["proof"]) == ("josh", "api-key")
    assert (event["actor"], event["proof"], event["subjectUser"]) == ("josh", "api-key", "ana")


async def test_naming_an_admin_as_actor_with_someone_elses_key_is_403_and_erases_nothing(api: Api) -> None:
    await _josh_everywhere(api)
    _, headers = await api.nats("delete-user", {"user_id": "josh", "actor": "josh"}, headers=_bearer(ANA_KEY))
    assert headers["Nats-Service-Error-Code"] == "403"
    assert "owner of the API key" in headers["Nats-Service-Error"] and "'ana'" in headers["Nats-Service-Error"]
    assert await api.store.count_episodes(GroupId("user_josh")) == 1


async def test_the_shared_key_proves_no_one_and_deletes_no_user(api: Api) -> None:
    await _josh_everywhere(api)
    _, headers = await api.nats("delete-user", {"user_id": "josh", "actor": "josh"}, headers=_bearer(SHARED_KEY))
    assert headers["Nats-Service-Error-Code"] == "403" and "key of its own" in headers["Nats-Service-Error"]
    assert await api.store.count_episodes(GroupId("user_josh")) == 1


async def test_over_http_delete_user_acts_as_the_keys_owner_and_the_audit_names_them(api: Api) -> None:
    await _josh_everywhere(api)
    sub = await api.rt.bus.nc.subscribe("memory.audit.>")
    r = await api.http.delete("/user/ana", headers=_bearer(ADMIN_KEY))
    event = json.loads((await sub.next_msg(timeout=5)).data)
    assert r.status_code == 200, r.text
    assert (event["actor"], event["proof"], event["subjectUser"]) == ("josh", "api-key", "ana")
    assert await api.store.count_episodes(GroupId("user_ana")) == 0


@pytest.mark.parametrize(("key", "why"), [(ANA_KEY, "'ana' is not an admin"), (SHARED_KEY, "key of its own")],
                         ids=["a-non-admins-key", "the-shared-key"])
async def test_over_http_delete_user_without_an_admins_own_key_is_403_and_erases_nothing(api: Api, key: str,
                                                                                          why: str) -> None:
    await _josh_everywhere(api)
    r = await api.http.delete("/user/josh", headers=_bearer(key))
    assert r.status_code == 403 and why in r.json()["detail"]
    assert await api.store.count_episodes(GroupId("user_josh")) == 1


async def test_a_key_whose_owner_users_yaml_does_not_know_is_refused_at_start(api: Api) -> None:
    config = keyed_api_config().model_copy(update={"keys": [ApiKey(owner="mallory", key=SecretStr("m" * 20))]})
    with pytest.raises(ConfigError, match=r"api\.keys\[0\]\.owner: 'mallory' is not a user in .*users\.yaml"):
        check_key_owners(MemoryService.of(api.rt, config))


def _file_bytes(path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists())


async def test_after_a_hard_delete_the_user_s_words_are_gone_from_the_database_file_and_its_log(api: Api) -> None:
    marker = "Zyxquorblat"  # a word that appears nowhere else
    for group in JOSH_GROUPS:
        await api.say(group, f"My secret codename is {marker}. I live in Berlin.")
    await api.say("user_ana", "I work at Globex.")
    path = api.rt.settings.store.sqlite_path
    assert marker.encode() in _file_bytes(path) or marker.lower().encode() in _file_bytes(path)
    await api.nats("delete-user", {"user_id": "josh", "actor": "josh"})
    raw = _file_bytes(path)
    assert marker.encode() not in raw and marker.lower().encode() not in raw
    assert b"Globex" in raw  # the other user's memory is still there


async def test_a_store_failure_part_way_through_an_erasure_leaves_every_group_of_the_user_as_it_was(api: Api) -> None:
    """The third of josh's groups fails the way a full disk does, after the first two were deleted in the same
    transaction: the erasure is one transaction, so nothing of josh is gone (and a retry can erase it all)."""
    await _josh_everywhere(api)
    before = {g: await api.store.count_episodes(GroupId(g)) for g in JOSH_GROUPS}
    writer = api.store._writer_conn()  # noqa: SLF001 - a trigger on the store's own connection fails its delete
    writer.execute(f"CREATE TEMP TRIGGER disk_full BEFORE DELETE ON episodes WHEN old.group_id = '{JOSH_GROUPS[-1]}' "
                   "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END")
    _, headers = await api.nats("delete-user", {"user_id": "josh"}, headers=_bearer(ADMIN_KEY))
    after = {g: await api.store.count_episodes(GroupId(g)) for g in JOSH_GROUPS}
    writer.execute("DROP TRIGGER disk_full")
    body, retried = await api.nats("delete-user", {"user_id": "josh"}, headers=_bearer(ADMIN_KEY))
    # a trigger's RAISE is a constraint error to SQLite (a 500); a real full disk is an OperationalError (a 503)
    assert headers["Nats-Service-Error-Code"] == "500" and "disk is full" in headers["Nats-Service-Error"]
    assert after == before == {g: 1 for g in JOSH_GROUPS}
    assert "Nats-Service-Error-Code" not in retried and body["remaining"] == 0
