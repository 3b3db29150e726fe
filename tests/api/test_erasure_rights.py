"""DELETE /group, delete-group and POST /clear: only for whom the identity rules allow, every erasure audited with
the key's proven owner, every refusal counted and logged (api/erasure_rights.py)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from mnemobus.shared.config import ApiSettings
from mnemobus.shared.groups import GroupId
from tests.api.conftest import ADMIN_KEY, ANA_KEY, SHARED_KEY, Api, keyed_api_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def api_config() -> ApiSettings:
    return keyed_api_config()


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _refused(api: Api, operation: str) -> float:
    return api.rt.metrics.erasures_refused.labels(operation=operation)._value.get()


async def _two_users(api: Api) -> None:
    await api.say("user_josh", "I live in Berlin.")
    await api.say("agent_echo__user_ana", "I work at Globex.")


async def _audited(api: Api, method: str, path: str, key: str) -> dict[str, Any]:
    """The audit event of an erasure that must succeed, after the two users have said something."""
    await _two_users(api)
    sub = await api.rt.bus.nc.subscribe("memory.audit.>")
    r = await api.http.request(method, path, headers=_bearer(key))
    assert r.status_code == 200, r.text
    return json.loads((await sub.next_msg(timeout=5)).data)  # type: ignore[no-any-return]


async def test_a_user_deletes_their_own_group_and_the_audit_names_them(api: Api) -> None:
    event = await _audited(api, "DELETE", "/group/agent_echo__user_ana", ANA_KEY)
    assert (event["kind"], event["actor"], event["proof"], event["subjectUser"]) == ("group_deleted", "ana",
                                                                                   "api-key", "ana")
    assert (event["groups"], event["episodes"]) == (["agent_echo__user_ana"], 1)
    assert await api.store.count_episodes(GroupId("agent_echo__user_ana")) == 0


async def test_a_user_may_not_delete_someone_elses_group_and_the_refusal_is_counted_and_logged(
        api: Api, caplog: pytest.LogCaptureFixture) -> None:
    await _two_users(api)
    before = _refused(api, "group_deleted")
    with caplog.at_level(logging.WARNING, logger="mnemobus.audit"):
        r = await api.http.delete("/group/user_josh", headers=_bearer(ANA_KEY))
    assert r.status_code == 403 and "'ana' may not erase group 'user_josh'" in r.json()["detail"]
    assert _refused(api, "group_deleted") == before + 1
    assert any("refused group_deleted of user_josh" in rec.getMessage() for rec in caplog.records)
    assert await api.store.count_episodes(GroupId("user_josh")) == 1


async def test_an_admin_deletes_anyones_group(api: Api) -> None:
    await _two_users(api)
    r = await api.http.delete("/group/agent_echo__user_ana", headers=_bearer(ADMIN_KEY))
    assert r.status_code == 200 and r.json()["episodes"] == 1


async def test_the_shared_key_deletes_no_group(api: Api) -> None:
    await _two_users(api)
    r = await api.http.delete("/group/user_josh", headers=_bearer(SHARED_KEY))
    assert r.status_code == 403 and "key of its own" in r.json()["detail"]
    assert await api.store.count_episodes(GroupId("user_josh")) == 1


async def test_over_nats_delete_group_is_checked_the_same_way(api: Api) -> None:
    await _two_users(api)
    _, headers = await api.nats("delete-group", {"group_id": "user_josh"}, headers=_bearer(ANA_KEY))
    assert headers["Nats-Service-Error-Code"] == "403"
    assert await api.store.count_episodes(GroupId("user_josh")) == 1


@pytest.mark.parametrize("key", [ANA_KEY, SHARED_KEY], ids=["a-non-admins-key", "the-shared-key"])
async def test_clear_without_an_admins_own_key_is_403_counted_and_erases_nothing(api: Api, key: str) -> None:
    await _two_users(api)
    before = _refused(api, "graph_cleared")
    r = await api.http.post("/clear", headers=_bearer(key))
    assert r.status_code == 403, r.text
    assert _refused(api, "graph_cleared") == before + 1
    assert await api.store.count_episodes() == 2


async def test_an_admin_clears_everything_and_the_audit_names_the_admin_and_the_groups(api: Api) -> None:
    event = await _audited(api, "POST", "/clear", ADMIN_KEY)
    assert (event["kind"], event["actor"], event["proof"], event["episodes"]) == ("graph_cleared", "josh",
                                                                                "api-key", 2)
    assert sorted(event["groups"]) == ["agent_echo__user_ana", "user_josh"]
    assert b"Berlin" not in json.dumps(event).encode()
    assert await api.store.count_episodes() == 0
