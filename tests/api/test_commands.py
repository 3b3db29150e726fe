"""/memory show | search | clear, for chat adapters (over NATS) and the CLI."""

from __future__ import annotations

import json

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.cli import memory as api_cli
from mnemobus.shared.config import ApiSettings, Settings
from pydantic import SecretStr

from tests.api.conftest import ANA_KEY, SHARED_KEY, Api, command, keyed_api_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def api_config() -> ApiSettings:
    return keyed_api_config()


def cli_settings(api: Api, key: str | None = None) -> Settings:
    """The operator's settings: the service's address and the key the operator sends (josh's unless given)."""
    return api.rt.settings.model_copy(update={"api": ApiSettings(api_key=SecretStr(key or api.key))})

JOSH, ANA = "user_josh", "user_ana"


async def ask(api: Api, content: str, user: str = "111", key: str | None = None) -> dict:
    """A command from `user`'s chat identity, sent with `key` (josh's unless given)."""
    msg = await api.rt.bus.request(subjects.api("command"), command(content, user=user).to_wire(), 5,
                                   headers={"Authorization": f"Bearer {key}"} if key else api.auth)
    return json.loads(msg.data)


async def test_show_lists_the_callers_active_facts(api: Api) -> None:
    await api.say(JOSH, "I live in Berlin.")
    reply = await ask(api, "/memory show")
    assert reply["ok"] and reply["items"] == ["tester lives in Berlin"]


async def test_show_leaves_out_a_superseded_fact(api: Api) -> None:
    await api.say(JOSH, "I live in Berlin.")
    await api.say(JOSH, "I moved from Berlin to London.")
    assert (await ask(api, "/memory show"))["items"] == ["tester lives in London (moved from Berlin)"]


async def test_search_finds_only_in_the_callers_groups(api: Api) -> None:
    await api.say(JOSH, "I work at Acme.")
    await api.say(ANA, "I work at Globex.")
    reply = await ask(api, "/memory search where do I work", user="222")
    assert reply["ok"] and sorted(reply["items"])[0].startswith('said on') and "Globex" in sorted(reply["items"])[0]
    assert [x.split(" (since")[0] for x in sorted(reply["items"])[1:]] == ["tester works at Globex"]


async def test_clear_by_a_non_admin_is_refused_and_erases_nothing(api: Api) -> None:
    await api.say(ANA, "I work at Globex.")
    reply = await ask(api, "/memory clear", user="222", key=ANA_KEY)
    assert not reply["ok"] and "admins only" in reply["text"]
    assert await api.store.count_facts(ANA) == 1


async def test_clear_with_the_shared_key_is_refused_since_it_proves_no_one(api: Api) -> None:
    await api.say(ANA, "I work at Globex.")
    reply = await ask(api, "/memory clear ana", key=SHARED_KEY)
    assert not reply["ok"] and "needs a key of its own" in reply["text"]
    assert await api.store.count_facts(ANA) == 1


async def test_clear_as_someone_else_than_the_keys_owner_is_refused(api: Api) -> None:
    await api.say(JOSH, "I work at Acme.")
    reply = await ask(api, "/memory clear josh", user="111", key=ANA_KEY)  # ana's key, josh's chat identity
    assert not reply["ok"] and "owner of the API key" in reply["text"] and "'ana'" in reply["text"]
    assert await api.store.count_facts(JOSH) == 1


async def test_clear_by_an_admin_erases_the_named_user(api: Api) -> None:
    await api.say(ANA, "I work at Globex.")
    reply = await ask(api, "/memory clear ana")
    assert reply["ok"] and await api.store.count_episodes(ANA) == 0


async def test_unknown_subcommand_answers_usage(api: Api) -> None:
    reply = await ask(api, "/memory dance")
    assert not reply["ok"] and reply["text"].startswith("usage:")


async def test_command_reply_goes_only_to_the_requesters_inbox(api: Api) -> None:
    await api.say(JOSH, "I live in Berlin.")
    seen: list[tuple[str, bytes]] = []

    async def spy(msg) -> None:  # type: ignore[no-untyped-def]
        seen.append((msg.subject, msg.data))

    sub = await api.rt.bus.subscribe(">", spy)
    reply_to = api.rt.bus.nc.new_inbox()
    inbox = await api.rt.bus.nc.subscribe(reply_to, max_msgs=1)
    await api.rt.bus.nc.publish(subjects.api("command"), command("/memory show").to_wire(), reply=reply_to,
                                headers=api.auth)
    answer = await inbox.next_msg(timeout=5)
    sentinel = api.rt.bus.nc.new_inbox()  # the spy sees one connection's messages in order: a leak comes first
    await api.rt.bus.nc.publish(sentinel, b"")
    with anyio.fail_after(5):
        while not any(s == sentinel for s, _ in seen):
            await anyio.sleep(0.01)
    await sub.unsubscribe()
    assert b"Berlin" in answer.data
    leaked = [s for s, d in seen if b"Berlin" in d and s != reply_to]
    assert leaked == []


async def test_cli_memory_show_prints_the_users_facts(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    await api.say(JOSH, "I live in Berlin.")
    args = api_cli.standalone_parser().parse_args(["memory", "show", "--user", "josh"])
    code = await anyio.to_thread.run_sync(args.handler, cli_settings(api), args)
    assert code == 0 and "tester lives in Berlin" in capsys.readouterr().out


async def test_cli_memory_clear_by_a_non_admin_exits_1_with_the_reason(api: Api,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    args = api_cli.standalone_parser().parse_args(["memory", "clear", "josh", "--user", "ana"])
    code = await anyio.to_thread.run_sync(args.handler, cli_settings(api, ANA_KEY), args)
    assert code == 1 and "admins only" in capsys.readouterr().err
