"""The whole system on each store: memory API (NATS and HTTP), worker, plugin and echo executor, on the test's
nats-server; josh (admin) and ana hold keys of their own, so the service knows who is asking."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mnemobus.shared import subjects
from mnemobus.api.service import EXTRA_URL, run_api
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.kernel.testing import run_lock
from mnemobus.shared.config import Settings
from plugins.echo import EchoExecutor
from plugins.memory import MemoryPlugin
from tests.api.conftest import Api, command, keyed_api_config
from tests.store.conftest import neo4j_uri  # noqa: F401 - the session's Neo4j, for the neo4j half

BACKENDS = ("sqlite", "neo4j")
#: the groups these tests write: emptied before and after each test (Neo4j is one database for the session)
PEOPLE = ("user_josh", "user_ana")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    path = tmp_path / "users.yaml"
    path.write_text("users:\n"
                    "  - id: josh\n    admin: true\n    identities:\n      discord: '111'\n"
                    "  - id: ana\n    identities:\n      discord: '222'\n")
    return path


@pytest.fixture
def settings(settings: Settings, backend: str, request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The suite's settings on the test's store, scheduled upkeep off unless a test turns it on. On Neo4j the test
    holds the run's lock on PEOPLE's groups: the server is shared by every xdist worker of the run."""
    update: dict[str, Any] = {"retention": settings.retention.model_copy(update={"scheduled": False}),
                              "decay": settings.decay.model_copy(update={"scheduled": False}),
                              # what reaches the agent is under test, not recall's speed: a first recall on a Neo4j just started took 24 s
                              # at load 30 (2 cores shared by seven sessions)
                              "memory": settings.memory.model_copy(update={"recall_deadline_ms": 60_000})}
    if backend == "neo4j":
        update["store"] = settings.store.model_copy(update={
            "backend": "neo4j", "neo4j": settings.store.neo4j.model_copy(
                update={"uri": request.getfixturevalue("neo4j_uri")})})
    if backend != "neo4j":
        yield settings.model_copy(update=update)
        return
    with run_lock(tmp_path_factory, "neo4j-people"):
        yield settings.model_copy(update=update)


async def _empty(store: Any) -> None:
    for group in await store.group_ids():
        if group.endswith(PEOPLE):
            await store.delete_group(group)


class System(Api):
    async def nats(self, endpoint: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                   ) -> tuple[dict[str, Any], dict[str, str]]:
        """As `Api.nats`, with room for a Neo4j started on a busy machine (its first reads load the group)."""
        msg = await self.rt.bus.request(subjects.api(endpoint), json.dumps(body or {}).encode(), 30,
                                        headers=self.auth if headers is None else headers)
        return (json.loads(msg.data) if msg.data else {}), dict(msg.headers or {})

    async def ask_agent(self, content: str, *, user: str = "111", channel: str = "c1") -> tuple[dict[str, Any], str]:
        """A chat request through the plugin: (the reply, the content the executor received)."""
        seen: list[dict[str, Any]] = []

        async def spy(msg: Any) -> None:
            seen.append(json.loads(msg.data))

        sub = await self.rt.bus.nc.subscribe(subjects.skill_execute("echo"), cb=spy)
        req = command(content, user=user)
        req.source.channel_id = channel
        msg = await self.rt.bus.request(subjects.SKILL_REQUEST, req.to_wire(), 90)
        await self.rt.bus.flush()
        await sub.unsubscribe()
        return json.loads(msg.data), seen[0]["payload"]["content"]

    async def command(self, content: str, *, user: str = "111", key: str | None = None) -> dict[str, Any]:
        """A /memory command from `user`'s chat identity to memory.api.command, with `key` (josh's unless given)."""
        headers = {"Authorization": f"Bearer {key}"} if key else self.auth
        msg = await self.rt.bus.request(subjects.api("command"), command(content, user=user).to_wire(), 30,
                                        headers=headers)
        return json.loads(msg.data)  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[System]:
    api_config = keyed_api_config()
    async with open_runtime(settings) as rt:
        await _empty(rt.engine.store)
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"plugin", "worker"},
                                                     plugins=[MemoryPlugin(), EchoExecutor("echo")],
                                                     task_status=task_status))
            await tg.start(functools.partial(run_api, rt, api=api_config))
            async with httpx.AsyncClient(base_url=rt.extra[EXTRA_URL], timeout=10) as client:
                yield System(rt, client, api_config.keys[0].key.get_secret_value())
            await _empty(rt.engine.store)
            rt.stop.set()


@pytest.fixture
async def system(settings: Settings) -> AsyncIterator[System]:
    async with running(settings) as s:
        yield s
