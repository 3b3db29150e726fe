"""What a request merely claims: its source's identity, and who may read the memory recalled for it."""

from __future__ import annotations

import json

import pytest

from mnemobus.shared import subjects
from mnemobus.shared.config import Settings
from tests.pipeline.conftest import ask, request, running, wait_for_episodes

pytestmark = pytest.mark.anyio

JOSH_SAYS = "I live in Berlin and I work at Acme."


async def _josh_told_us(rt) -> None:  # type: ignore[no-untyped-def]
    await ask(rt, request(JOSH_SAYS))
    assert await wait_for_episodes(rt, "user_josh", 1) == 1


async def test_a_bare_canonical_id_on_an_open_bus_gets_a_stranger_s_groups(pipeline) -> None:
    await _josh_told_us(pipeline)
    reply = await ask(pipeline, request("where do I live?", user="josh", platform="cli"))
    assert reply["memory"]["groups"] == ["user_cli_josh", "agent_echo__user_cli_josh"]
    assert "Berlin" not in reply["memory"]["block"]


async def test_a_bare_canonical_id_from_a_bus_that_enforces_permissions_is_that_user(settings: Settings) -> None:
    trusted = settings.model_copy(update={"nats": settings.nats.model_copy(update={"permissions_enforced": True})})
    async with running(trusted) as rt:
        await _josh_told_us(rt)
        reply = await ask(rt, request("where do I live?", user="josh", platform="cli"))
    assert reply["memory"]["groups"][0] == "user_josh" and "Berlin" in reply["memory"]["block"]


async def test_the_broadcast_copy_of_an_answer_carries_no_recalled_memory(pipeline) -> None:
    await _josh_told_us(pipeline)
    sub = await pipeline.bus.nc.subscribe(subjects.skill_response("echo"))
    reply = await ask(pipeline, request("where do I live?"))
    broadcast = json.loads((await sub.next_msg(timeout=5)).data)
    assert "Berlin" in reply["memory"]["block"]
    assert broadcast["memory"]["block"] == "" and broadcast["memory"]["groups"] == []
    assert broadcast["memory"]["status"] == reply["memory"]["status"] and broadcast["content"] == reply["content"]


async def test_memory_in_broadcast_puts_the_recalled_block_on_the_broadcast_too(settings: Settings) -> None:
    async with running(settings, memory_in_broadcast=True) as rt:
        await _josh_told_us(rt)
        sub = await rt.bus.nc.subscribe(subjects.skill_response("echo"))
        await ask(rt, request("where do I live?"))
        broadcast = json.loads((await sub.next_msg(timeout=5)).data)
    assert "Berlin" in broadcast["memory"]["block"]
