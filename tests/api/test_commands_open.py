"""On a service without an API key and on an open bus, a caller's claimed identity is only a claim."""

from __future__ import annotations

import json

import pytest

from mnemobus.shared import subjects
from tests.api.conftest import Api, command

pytestmark = pytest.mark.anyio


async def ask(api: Api, content: str, *, user: str, platform: str) -> dict:
    msg = await api.rt.bus.request(subjects.api("command"), command(content, user=user, platform=platform).to_wire(), 5)
    return json.loads(msg.data)


async def test_a_bare_canonical_id_claimed_by_an_unknown_caller_reads_none_of_that_users_memory(api: Api) -> None:
    await api.say("user_josh", "I live in Berlin.")
    reply = await ask(api, "/memory show", user="josh", platform="cli")
    assert reply["groups"] == ["user_cli_josh", "agent_echo__user_cli_josh"]
    assert not any("Berlin" in item for item in reply["items"])


async def test_a_listed_platform_identity_still_maps_to_its_user(api: Api) -> None:
    await api.say("user_josh", "I live in Berlin.")
    reply = await ask(api, "/memory show", user="111", platform="discord")
    assert reply["ok"] and reply["items"] == ["tester lives in Berlin"]


async def test_clear_on_a_service_that_cannot_tell_who_asks_is_refused_and_erases_nothing(api: Api) -> None:
    await api.say("user_ana", "I work at Globex.")
    reply = await ask(api, "/memory clear ana", user="111", platform="discord")
    assert not reply["ok"] and "api.keys" in reply["text"]
    assert await api.store.count_episodes("user_ana") == 1


async def test_delete_user_on_an_open_service_is_403_whatever_actor_it_names(api: Api) -> None:
    await api.say("user_ana", "I work at Globex.")
    _, headers = await api.nats("delete-user", {"user_id": "ana", "actor": "josh"})
    assert headers["Nats-Service-Error-Code"] == "403"
    assert "api.keys" in headers["Nats-Service-Error"]
    assert await api.store.count_episodes("user_ana") == 1
