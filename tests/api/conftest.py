"""A running memory API (NATS and HTTP) with the extraction worker, on the test's own nats-server and store."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from pydantic import SecretStr

from mnemobus.shared import subjects
from mnemobus.api.service import EXTRA_SERVICE, EXTRA_URL, run_api
from mnemobus.shared.config import ApiKey, ApiSettings
from mnemobus.kernel.app import Runtime, open_runtime, serve
from mnemobus.shared.config import Settings


#: josh's key (an admin in users.yaml) to the services that must know who is asking (`/memory clear`, delete-user)
ADMIN_KEY = "test-admin-key-0123456789"
#: ana's key (no admin)
ANA_KEY = "test-ana-key-0123456789ab"
#: the service's shared key (`api.api_key`): lets a caller in, proves no one
SHARED_KEY = "test-shared-key-012345678"


@dataclass
class Api:
    rt: Runtime
    http: httpx.AsyncClient
    key: str | None = None

    @property
    def auth(self) -> dict[str, str]:
        """The headers a caller holding the service's API key sends ({} when it has none)."""
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    @property
    def store(self) -> Any:
        return self.rt.engine.store

    @property
    def service(self) -> Any:
        return self.rt.extra[EXTRA_SERVICE]

    async def nats(self, endpoint: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                   ) -> tuple[dict[str, Any], dict[str, str]]:
        """One request to memory.api.<endpoint>: (decoded body or {}, headers); sends the key unless `headers` given."""
        msg = await self.rt.bus.request(subjects.api(endpoint), json.dumps(body or {}).encode(), 5,
                                        headers=self.auth if headers is None else headers)
        return (json.loads(msg.data) if msg.data else {}), dict(msg.headers or {})

    async def say(self, group: str, *contents: str, role_type: str = "user") -> list[str]:
        """POST /messages, then wait until the worker has stored every episode."""
        before = await self.store.count_episodes(group)
        r = await self.http.post("/messages", json={"group_id": group, "messages": [
            {"role_type": role_type, "role": "tester", "content": c} for c in contents]}, headers=self.auth)
        assert r.status_code == 202, r.text
        await wait_for(lambda: self.store.count_episodes(group), before + len(contents))
        return r.json()["episode_uuids"]


async def wait_for(count: Callable[[], Any], n: int, timeout: float = 30) -> int:
    """The count once it reaches `n` (at once when it does); a test that goes on with fewer fails here, saying so
    (it returned the short count after 10 s and a search then found nothing: a failure far from its cause, seen with
    four test workers on two busy cores). The deadline only bounds a failing test."""
    got = -1
    with anyio.move_on_after(timeout):
        while (got := await count()) < n:
            await anyio.sleep(0.02)
    assert got >= n, f"only {got} of {n} after {timeout:g} s"
    return got


@pytest.fixture
def api_config() -> ApiSettings:
    return ApiSettings(port=0, drain_timeout_s=2)


def keyed_api_config() -> ApiSettings:
    """A service that knows who is asking: josh's and ana's keys, and a shared key that proves no one."""
    return ApiSettings(port=0, drain_timeout_s=2, api_key=SecretStr(SHARED_KEY),
                       keys=[ApiKey(owner="josh", key=SecretStr(ADMIN_KEY)), ApiKey(owner="ana", key=SecretStr(ANA_KEY))])


@pytest.fixture
async def api(settings: Settings, api_config: ApiSettings) -> AsyncIterator[Api]:
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"worker"}, task_status=task_status))
            await tg.start(functools.partial(run_api, rt, api=api_config))
            async with httpx.AsyncClient(base_url=rt.extra[EXTRA_URL], timeout=10) as client:
                # the caller holds the first personal key (josh's, in keyed_api_config), else the shared one
                key = api_config.keys[0].key if api_config.keys else api_config.api_key
                key = key.get_secret_value() if key is not None else None
                yield Api(rt, client, key)
            rt.stop.set()


@pytest.fixture
def users_file(tmp_path):  # type: ignore[no-untyped-def]
    """An admin (josh) and an ordinary user (ana), each with a chat identity."""
    path = tmp_path / "users.yaml"
    path.write_text(
        "users:\n"
        "  - id: josh\n    admin: true\n    identities:\n      discord: '111'\n"
        "  - id: ana\n    identities:\n      discord: '222'\n"
    )
    return path


def command(content: str, *, user: str = "111", platform: str = "discord", agent: str = "echo") -> Any:
    from mnemobus.shared.envelope import Meta, Payload, SkillRequest, Source

    return SkillRequest(source=Source(platform=platform, user_id=user, channel_id="c1"),
                        payload=Payload(skill="chat", content=content, meta=Meta(agent_id=agent)))
