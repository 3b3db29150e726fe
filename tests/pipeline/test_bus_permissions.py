"""Per-role NATS users on a real nats-server: each role works with only its own subjects, and nobody else can
write where a role is trusted (forged episodes, identity-bearing API calls)."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import nats
import pytest
from nats.errors import TimeoutError as NatsTimeout
from pydantic import SecretStr

from mnemobus import subjects
from mnemobus.api.service import run_api
from mnemobus.app import Runtime, open_runtime, serve
from mnemobus.bus.permissions import ROLES, generated_passwords, nats_authorization
from mnemobus.bus.server import EmbeddedNatsServer
from mnemobus.cli.nats_users import write_users
from mnemobus.config import ApiSettings, Settings
from mnemobus.envelope import EpisodeMessage, utcnow
from mnemobus.store.model import episode_id_for
from plugins.memory import MemoryPlugin
from tests.pipeline.conftest import request, wait_for_episodes

pytestmark = pytest.mark.anyio


@pytest.fixture
def passwords() -> dict[str, str]:
    return generated_passwords()


@pytest.fixture
def secured_server(tmp_path: Path, passwords: dict[str, str]) -> Iterator[EmbeddedNatsServer]:
    server = EmbeddedNatsServer(tmp_path / "nats-secured", config=nats_authorization(passwords))
    server.start()
    yield server
    server.stop()


def as_role(settings: Settings, server: EmbeddedNatsServer, role: str, password: str) -> Settings:
    nats_settings = settings.nats.model_copy(update={"url": server.url, "user": role, "password": SecretStr(password),
                                                     "permissions_enforced": True})
    return settings.model_copy(update={"nats": nats_settings})


async def connect(server: EmbeddedNatsServer, role: str, password: str, errors: list[str]) -> nats.NATS:
    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    return await nats.connect(server.url, user=role, password=password, error_cb=on_error, connect_timeout=2,
                              allow_reconnect=False)


@contextlib.asynccontextmanager
async def deployment(settings: Settings, server: EmbeddedNatsServer,
                     passwords: dict[str, str]) -> AsyncIterator[dict[str, Runtime]]:
    """Plugin, worker and api, each its own runtime and connection under its own NATS user."""
    async with contextlib.AsyncExitStack() as stack:
        runtimes = {role: await stack.enter_async_context(open_runtime(as_role(settings, server, role, passwords[role])))
                    for role in ("worker", "plugin", "api")}
        async with anyio.create_task_group() as tg:  # ends before the connections close
            await tg.start(lambda task_status: serve(runtimes["worker"], {"worker"}, task_status=task_status))
            await tg.start(lambda task_status: serve(runtimes["plugin"], {"plugin"}, plugins=[MemoryPlugin()],
                                                     task_status=task_status))
            await tg.start(functools.partial(run_api, runtimes["api"],
                                             api=ApiSettings(port=0, http=False, drain_timeout_s=2)))
            yield runtimes
            for rt in runtimes.values():
                rt.stop.set()


@contextlib.asynccontextmanager
async def echo_executor(server: EmbeddedNatsServer, password: str, errors: list[str]) -> AsyncIterator[None]:
    nc = await connect(server, "executor", password, errors)

    async def answer(msg) -> None:  # type: ignore[no-untyped-def]
        await msg.respond(json.dumps({"content": "noted"}).encode())

    await nc.subscribe(subjects.skill_execute("echo"), cb=answer)
    try:
        yield
    finally:
        await nc.close()


async def test_every_role_does_its_work_under_its_own_user_and_a_claimed_identity_is_believed(
        settings: Settings, secured_server: EmbeddedNatsServer, passwords: dict[str, str]) -> None:
    errors: list[str] = []
    async with deployment(settings, secured_server, passwords) as rts, \
            echo_executor(secured_server, passwords["executor"], errors):
        publisher = await connect(secured_server, "publisher", passwords["publisher"], errors)
        req = request("I live in Berlin.", user="josh", platform="cli")
        reply = json.loads((await publisher.request(subjects.SKILL_REQUEST, req.to_wire(), timeout=10)).data)
        stored = await wait_for_episodes(rts["worker"], "user_josh", 1)
        client = await connect(secured_server, "client", passwords["client"], errors)
        found = await client.request(subjects.api("search"), json.dumps(
            {"group_ids": ["user_josh"], "query": "Berlin", "max_facts": 5}).encode(), timeout=10)
        await publisher.close()
        await client.close()
    assert reply["content"] == "noted" and stored == 1
    assert any("Berlin" in f["fact"] for f in json.loads(found.data)["facts"])
    assert errors == []
    assert "Violation" not in secured_server.log_text()  # nats-server logs "Publish Violation", "Subscription ..."


async def test_a_publisher_cannot_forge_an_episode(settings: Settings, secured_server: EmbeddedNatsServer,
                                                   passwords: dict[str, str]) -> None:
    errors: list[str] = []
    async with deployment(settings, secured_server, passwords) as rts:
        publisher = await connect(secured_server, "publisher", passwords["publisher"], errors)
        group = "user_josh"
        forged = EpisodeMessage(episode_id=episode_id_for(group, "forged", "exchange"), group_id=group,
                                content="I live in Paris.", source_message_id="forged", reference_time=utcnow())
        await publisher.publish(subjects.episode(group), forged.to_wire())
        await publisher.flush()
        await anyio.sleep(1.0)
        await publisher.close()
        stored = await rts["worker"].engine.store.count_episodes(group)
    assert stored == 0
    assert any("permissions violation" in e.lower() and subjects.episode(group) in e for e in errors), errors
    assert f'Publish Violation - Subject "{subjects.episode(group)}"' in secured_server.log_text()


async def test_a_client_cannot_call_delete_user_but_an_operator_can(settings: Settings,
                                                                     secured_server: EmbeddedNatsServer,
                                                                     passwords: dict[str, str]) -> None:
    errors: list[str] = []
    body = json.dumps({"user_id": "josh", "actor": "josh"}).encode()
    async with deployment(settings, secured_server, passwords) as rts, \
            echo_executor(secured_server, passwords["executor"], errors):
        publisher = await connect(secured_server, "publisher", passwords["publisher"], errors)
        await publisher.request(subjects.SKILL_REQUEST, request("I live in Berlin.", user="josh",
                                                                platform="cli").to_wire(), timeout=10)
        await publisher.close()
        assert await wait_for_episodes(rts["worker"], "user_josh", 1) == 1
        client = await connect(secured_server, "client", passwords["client"], errors)
        with pytest.raises(NatsTimeout):
            await client.request(subjects.api("delete-user"), body, timeout=1.5)
        await client.close()
        kept = await rts["worker"].engine.store.count_episodes("user_josh")
        operator = await connect(secured_server, "operator", passwords["operator"], errors)
        erased = json.loads((await operator.request(subjects.api("delete-user"), body, timeout=10)).data)
        await operator.close()
    assert kept == 1 and erased["episodes"] >= 1 and erased["remaining"] == 0
    assert any("permissions violation" in e.lower() and "delete-user" in e for e in errors), errors


async def test_the_poller_polls_under_its_own_user_without_a_permission_violation(
        settings: Settings, secured_server: EmbeddedNatsServer, passwords: dict[str, str]) -> None:
    from worldstate.poller import current_document, run_poller

    async with deployment(settings, secured_server, passwords):
        async with open_runtime(as_role(settings, secured_server, "worldstate", passwords["worldstate"])) as ws:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    await tg.start(run_poller, ws)  # started once its first poll is done
                    document = current_document(ws)
                    ws.stop.set()
            violations = ws.metrics.bus_errors.labels(kind="permissions_violation")._value.get()
    assert document is not None and set(document["domains"]) >= {"memory", "bus"}
    assert violations == 0 and "Violation" not in secured_server.log_text()


async def test_a_component_publishing_outside_its_permissions_is_counted_not_silent(
        settings: Settings, secured_server: EmbeddedNatsServer, passwords: dict[str, str]) -> None:
    async with open_runtime(as_role(settings, secured_server, "plugin", passwords["plugin"]), need_engine=False) as rt:
        await rt.bus.publish("worldstate.goal.forged", b"{}")  # the poller's subject, not the plugin's
        await rt.bus.flush()
        with anyio.move_on_after(5):
            while rt.metrics.bus_errors.labels(kind="permissions_violation")._value.get() < 1:
                await anyio.sleep(0.05)
        counted = rt.metrics.bus_errors.labels(kind="permissions_violation")._value.get()
    assert counted == 1


def test_nats_users_writes_a_server_config_and_one_private_env_file_per_role(tmp_path: Path) -> None:
    passwords = write_users(tmp_path / "users", list(ROLES))
    files = sorted(p.name for p in (tmp_path / "users").iterdir())
    assert files == sorted(["authorization.conf", *(f"{r}.env" for r in ROLES)])
    assert all((tmp_path / "users" / f).stat().st_mode & 0o077 == 0 for f in files)
    plugin_env = (tmp_path / "users" / "plugin.env").read_text()
    assert f"MNEMOBUS_NATS__PASSWORD={passwords['plugin']}" in plugin_env
    with EmbeddedNatsServer(tmp_path / "nats", config=(tmp_path / "users" / "authorization.conf").read_text()) as srv:
        assert srv.url


def test_a_role_nobody_defined_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no such role.*wizard"):
        nats_authorization({"wizard": "x" * 32})


def test_a_nats_user_without_a_password_is_refused_at_start() -> None:
    from mnemobus.config import NatsSettings

    with pytest.raises(ValueError, match="user and password go together"):
        NatsSettings(user="plugin")
