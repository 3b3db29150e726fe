"""The scripted conversation `make run` shows: a fact told in turn one comes back in turn two."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from mnemobus.shared import subjects
from mnemobus.shared.envelope import Meta, Payload, SkillRequest, SkillResponse, Source
from mnemobus.shared.groups import user_group
from mnemobus.store.model import episode_id_for

TURNS = [
    "I moved from Berlin to London last month.",
    "I switched from vim to neovim for my editor.",
    "Where do I live now, and which editor do I use?",
]
DEMO_USER = ("discord", "123456789012345678")  # josh in workspace/users.yaml


async def run_demo(rt, say: Callable[[str], None]) -> bool:  # type: ignore[no-untyped-def]
    """Publish the turns as a chat adapter would; wait for each episode to be stored."""
    platform, uid = DEMO_USER
    user = rt.identity.lookup(platform, uid)
    group = user_group(user.id) if user else None
    ok = True
    for i, text in enumerate(TURNS, 1):
        req = SkillRequest(source=Source(platform=platform, user_id=uid, channel_id="demo"),
                           payload=Payload(skill="chat", content=text, meta=Meta(agent_id="echo")))
        say(f"\n[demo] turn {i}: user says {text!r}")
        reply = await rt.bus.request(subjects.SKILL_REQUEST, req.to_wire(), timeout_s=rt.settings.memory.executor_timeout_s + 5)
        resp = SkillResponse.model_validate_json(reply.data)
        if resp.error:
            say(f"[demo] agent error: {resp.error}")
            ok = False
            continue
        say(f"[demo] agent replied: {resp.content!r}")
        if resp.memory and resp.memory.block:
            say("[demo] memory context the agent received:")
            for line in resp.memory.block.splitlines():
                say(f"         {line}")
        if group is None:
            continue
        episode_id = episode_id_for(group, req.id, "exchange")
        with anyio.move_on_after(10):
            while await rt.engine.store.get_episode(group, episode_id) is None:
                await anyio.sleep(0.05)
        stored = await rt.engine.store.get_episode(group, episode_id)
        if stored is None:
            say(f"[demo] episode {episode_id[:8]} was not stored within 10 s")
            ok = False
        else:
            say(f"[demo] stored episode {stored.id[:8]} in group {stored.group_id}: {stored.content!r}")
    if group is not None:
        count = await rt.engine.store.count_episodes(group)
        say(f"\n[demo] group {group} now holds {count} episode(s) in {rt.settings.store.backend} "
            f"({rt.settings.store.sqlite_path if rt.settings.store.backend == 'sqlite' else rt.settings.store.neo4j.uri})")
    return ok
