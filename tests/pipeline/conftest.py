"""A running pipeline (plugin, worker, echo executor) on the test's own nats-server."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.kernel.app import Runtime, open_runtime, serve
from mnemobus.shared.config import Settings
from mnemobus.shared.envelope import Meta, Payload, SkillRequest, Source
from plugins.echo import EchoExecutor
from plugins.memory import MemoryPlugin


@pytest.fixture
async def pipeline(settings: Settings) -> AsyncIterator[Runtime]:
    async with running(settings) as rt:
        yield rt


@contextlib.asynccontextmanager
async def running(settings: Settings, **memory: object) -> AsyncIterator[Runtime]:
    """The pipeline (plugin and worker) on these settings, with `memory` settings changed if given."""
    if memory:
        settings = settings.model_copy(update={"memory": settings.memory.model_copy(update=memory)})
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"plugin", "worker"},
                                                     plugins=[MemoryPlugin(), EchoExecutor("echo")],
                                                     task_status=task_status))
            yield rt
            rt.stop.set()


def request(content: str, *, user: str | None = "111", platform: str = "discord", agent: str = "echo",
            system_actor: str | None = None) -> SkillRequest:
    return SkillRequest(source=Source(platform=platform, user_id=user, channel_id="c1"),
                        payload=Payload(skill="chat", content=content,
                                        meta=Meta(agent_id=agent, system_actor=system_actor)))


async def ask(rt: Runtime, req: SkillRequest, timeout: float = 10) -> dict:
    msg = await rt.bus.request(subjects.SKILL_REQUEST, req.to_wire(), timeout_s=timeout)
    return json.loads(msg.data)


async def wait_for_episodes(rt: Runtime, group: str, n: int, timeout: float = 30) -> int:
    """The group's episode count once it reaches `n` (at once when it does), or what it is after `timeout`: the
    deadline only bounds a failing test (a 64 kB episode took over 10 s with four test workers on two busy cores)."""
    count = 0
    with anyio.move_on_after(timeout):
        while (count := await rt.engine.store.count_episodes(group)) < n:
            await anyio.sleep(0.02)
    return count


async def dead_letters(rt: Runtime, group: str | None = None, n: int = 1, timeout: float = 5) -> list:
    from mnemobus.bus.dlq import list_letters

    letters: list = []
    with anyio.move_on_after(timeout):
        while len(letters := await list_letters(rt.bus, group)) < n:
            await anyio.sleep(0.02)
    return letters
