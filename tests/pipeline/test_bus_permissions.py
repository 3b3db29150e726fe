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

from mnemobus.shared import subjects
from mnemobus.api.service import run_api
from mnemobus.kernel.app import Runtime, open_runtime, serve
from mnemobus.bus.permissions import ROLES, generated_passwords, nats_authorization
from mnemobus.bus.server import EmbeddedNatsServer
from mnemobus.cli.nats_users import write_users
from mnemobus.shared.config import ApiSettings, Settings
from mnemobus.shared.envelope import EpisodeMessage, utcnow
from mnemobus.store.model import episode_id_for
from plugins.memory import MemoryPlugin
from tests.pipeline.conftest import dead_letters, request, wait_for_episodes

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
                              allow_reconnect=False, inbox_prefix=subjects.inbox_prefix(role, "test"),
                              skip_subject_validation=True)  # as an attacker would: the server judges


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


@pytest.mark.parametrize(("endpoint", "body"), [("delete-user", {"user_id": "josh", "actor": "josh"}),
                                              ("delete-group", {"group_id": "user_josh"})])
async def test_a_client_cannot_erase_a_user_or_a_group_but_an_operator_can(settings: Settings,
                                                                          secured_server: EmbeddedNatsServer,
                                                                          passwords: dict[str, str], endpoint: str,
                                                                          body: dict[str, str]) -> None:
    errors: list[str] = []
    sent = json.dumps(body).encode()
    async with deployment(settings, secured_server, passwords) as rts, \
            echo_executor(secured_server, passwords["executor"], errors):
        publisher = await connect(secured_server, "publisher", passwords["publisher"], errors)
        await publisher.request(subjects.SKILL_REQUEST, request("I live in Berlin.", user="josh",
                                                                platform="cli").to_wire(), timeout=10)
        await publisher.close()
        assert await wait_for_episodes(rts["worker"], "user_josh", 1) == 1
        client = await connect(secured_server, "client", passwords["client"], errors)
        with pytest.raises(NatsTimeout):
            await client.request(subjects.api(endpoint), sent, timeout=1.5)
        await client.close()
        kept = await rts["worker"].engine.store.count_episodes("user_josh")
        operator = await connect(secured_server, "operator", passwords["operator"], errors)
        erased = json.loads((await operator.request(subjects.api(endpoint), sent, timeout=10)).data)
        await operator.close()
        left = await rts["worker"].engine.store.count_episodes("user_josh")
    assert kept == 1 and erased["episodes"] >= 1 and left == 0
    assert any("permissions violation" in e.lower() and endpoint in e for e in errors), errors


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


def test_the_written_authorization_grants_no_shared_inbox_nor_the_whole_jetstream_api(tmp_path: Path) -> None:
    write_users(tmp_path / "users", list(ROLES))
    conf = (tmp_path / "users" / "authorization.conf").read_text()
    users = json.loads(conf.removeprefix("authorization "))["users"]
    granted = {u["user"]: (u["permissions"]["publish"].get("allow", []), u["permissions"]["subscribe"]["allow"])
               for u in users}
    assert not [r for r, (pub, sub) in granted.items() if "_INBOX.>" in sub or ">" in sub or "$JS.API.>" in pub]
    assert {r: [s for s in sub if s.startswith("_INBOX")] for r, (_, sub) in granted.items()} == \
        {r: ([] if r == "executor" else [f"_INBOX_{r}.>"]) for r in ROLES}
    assert all(u["permissions"].get("allow_responses", {"max": 1})["max"] == 1 for u in users)


def test_a_role_nobody_defined_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="no such role.*wizard"):
        nats_authorization({"wizard": "x" * 32})


def test_a_nats_user_without_a_password_is_refused_at_start() -> None:
    from mnemobus.shared.config import NatsSettings

    with pytest.raises(ValueError, match="user and password go together"):
        NatsSettings(user="plugin")


async def _until(check, timeout: float = 10) -> None:  # type: ignore[no-untyped-def]
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.02)


def _snooped_subjects(role: str) -> list[str]:
    """Every inbox but the role's own: the shared default, the literal `_INBOX_*` and each other role's."""
    return ["_INBOX.>", "_INBOX_*.>", *(f"{subjects.inbox_root(other)}.>" for other in ROLES if other != role)]


async def test_no_role_reads_the_replies_or_deliveries_sent_to_another_roles_inbox(
        settings: Settings, secured_server: EmbeddedNatsServer, passwords: dict[str, str]) -> None:
    snooped: dict[str, list[bytes]] = {role: [] for role in ROLES}
    refusals: dict[str, list[str]] = {role: [] for role in ROLES}
    errors: list[str] = []
    async with deployment(settings, secured_server, passwords) as rts:
        nc = await connect(secured_server, "executor", passwords["executor"], errors)

        async def answer(msg) -> None:  # type: ignore[no-untyped-def]
            await msg.respond(json.dumps({"content": f"echo {msg.data.decode()}"}).encode())

        await nc.subscribe(subjects.skill_execute("echo"), cb=answer)
        snoopers = []
        for role in ROLES:
            snooper = await connect(secured_server, role, passwords[role], refusals[role])
            async def keep(msg, r: str = role) -> None:  # type: ignore[no-untyped-def]
                snooped[r].append(msg.data)

            for subject in _snooped_subjects(role):
                await snooper.subscribe(subject, cb=keep)
            snoopers.append(snooper)
        for role in ROLES:  # every snooping subscription refused by the server before any secret is sent
            await _until(lambda r=role: len(refusals[r]) >= len(_snooped_subjects(r)))
        publisher = await connect(secured_server, "publisher", passwords["publisher"], errors)
        client = await connect(secured_server, "client", passwords["client"], errors)
        secrets = [f"locker-code-{i}-{passwords['client'][:6]}" for i in range(5)]
        replies, found = [], []
        for i, secret in enumerate(secrets):
            req = request(f"My secret is {secret}.", user="josh", platform="cli")
            replies.append((await publisher.request(subjects.SKILL_REQUEST, req.to_wire(), timeout=10)).data)
            assert await wait_for_episodes(rts["worker"], "user_josh", i + 1) == i + 1
            found.append((await client.request(subjects.api("episodes"), json.dumps(
                {"group_id": "user_josh", "last_n": 1}).encode(), timeout=10)).data)
        for c in (*snoopers, publisher, client, nc):
            await c.flush()
            await c.close()
    assert all(secret.encode() in reply for secret, reply in zip(secrets, replies, strict=True))
    assert all(secret.encode() in answer for secret, answer in zip(secrets, found, strict=True))
    assert {role: len(msgs) for role, msgs in snooped.items()} == {role: 0 for role in ROLES}
    assert all(all("permissions violation for subscription" in e.lower() for e in refusals[r]) for r in ROLES), refusals
    assert errors == []


#: (role, a JetStream API request that would read memory back)
_JS_READS = [
    ("plugin", f"$JS.API.STREAM.MSG.GET.{subjects.EPISODE_STREAM}"),
    ("plugin", f"$JS.API.DIRECT.GET.{subjects.EPISODE_STREAM}"),
    ("plugin", f"$JS.API.CONSUMER.CREATE.{subjects.EPISODE_STREAM}.spy"),
    ("plugin", f"$JS.API.CONSUMER.MSG.NEXT.{subjects.EPISODE_STREAM}.{subjects.WORKER_DURABLE}"),
    ("worker", f"$JS.API.STREAM.MSG.GET.{subjects.EPISODE_STREAM}"),
    ("worker", f"$JS.API.CONSUMER.CREATE.{subjects.EPISODE_STREAM}.spy"),
    ("worker", f"$JS.API.STREAM.MSG.GET.{subjects.DLQ_STREAM}"),
    ("api", f"$JS.API.STREAM.MSG.GET.{subjects.EPISODE_STREAM}"),
    ("worldstate", f"$JS.API.STREAM.MSG.GET.{subjects.EPISODE_STREAM}"),
    ("worldstate", f"$JS.API.CONSUMER.MSG.NEXT.{subjects.EPISODE_STREAM}.{subjects.WORKER_DURABLE}"),
    ("client", f"$JS.API.STREAM.MSG.GET.{subjects.EPISODE_STREAM}"),
    ("publisher", f"$JS.API.STREAM.MSG.GET.{subjects.EPISODE_STREAM}"),
    ("operator", f"$JS.API.STREAM.MSG.GET.{subjects.EPISODE_STREAM}"),
]


@pytest.mark.parametrize(("role", "read"), _JS_READS, ids=[f"{r}-{s.split('API.')[1]}" for r, s in _JS_READS])
async def test_a_jetstream_read_of_the_stored_memory_is_refused(
        role: str, read: str, secured_server: EmbeddedNatsServer, passwords: dict[str, str]) -> None:
    refusals: list[str] = []
    nc = await connect(secured_server, role, passwords[role], refusals)
    await nc.publish(read, json.dumps({"seq": 1}).encode(), reply=nc.new_inbox())
    await _until(lambda: len(refusals) >= 1)
    await nc.close()
    assert refusals == [f'nats: permissions violation for publish to "{read.lower()}"']  # nats-py lowers it
    assert f'"$G/user:{role}" - Publish Violation - Subject "{read}"' in secured_server.log_text()


async def test_a_reply_subject_naming_the_workers_fetch_inbox_is_not_answered_and_the_worker_never_restarts(
        settings: Settings, secured_server: EmbeddedNatsServer, passwords: dict[str, str]) -> None:
    errors: list[str] = []
    async with deployment(settings, secured_server, passwords) as rts, \
            echo_executor(secured_server, passwords["executor"], errors):
        worker = rts["worker"].worker
        await _until(lambda: worker.consumer.inbox is not None)
        inbox = worker.consumer.inbox
        client = await connect(secured_server, "client", passwords["client"], errors)
        publisher = await connect(secured_server, "publisher", passwords["publisher"], errors)
        for _ in range(10):
            await client.publish(subjects.api("health"), b"{}", reply=f"{inbox}")
            await publisher.publish(subjects.SKILL_REQUEST, request("hello", user="josh", platform="cli").to_wire(),
                                    reply=inbox)
        api_forged = rts["api"].metrics.messages.labels(endpoint="api.health", outcome="forged_reply")
        await _until(lambda: api_forged._value.get() >= 10)
        async with open_runtime(as_role(settings, secured_server, "operator", passwords["operator"]),
                                need_engine=False) as operator:
            letters = await dead_letters(operator, subjects.UNROUTED_GROUP, n=10)
        answer = await publisher.request(subjects.SKILL_REQUEST, request("I live in Oslo.", user="josh",
                                                                         platform="cli").to_wire(), timeout=10)
        stored = await wait_for_episodes(rts["worker"], "user_josh", 1)
        await client.close()
        await publisher.close()
    assert [letter.letter.reason for letter in letters].count("forged_reply") == 10
    assert json.loads(answer.data)["content"] == "noted" and stored == 1
    assert worker.restarts == 0 and rts["worker"].metrics.worker_restarts._value.get() == 0
    assert rts["worker"].metrics.worker_protocol_errors.labels(kind="not_jetstream")._value.get() == 0
    assert errors == []
