"""Formation gates: every exchange by default; windows of N exchanges when configured."""

import anyio
import pytest

from mnemobus.kernel.app import open_runtime, serve
from mnemobus.shared.envelope import EpisodeMessage
from plugins.echo import EchoExecutor
from plugins.memory import MemoryPlugin
from plugins.memory.formation import FormationGate
from tests.bus_counts import settle_behind_a_sentinel
from tests.pipeline.conftest import ask, request, wait_for_episodes


def _turn(i: int, channel: str = "c1") -> EpisodeMessage:
    return EpisodeMessage(episode_id=f"e{i}", group_id="user_josh", content=f"turn {i}", response=f"reply {i}",
                          source_message_id=f"m{i}", channel_id=channel)


def test_default_gate_emits_every_exchange_unbuffered():
    gate = FormationGate()
    assert gate.offer(_turn(1)).episode_id == "e1" and not gate.buffering


def test_message_gate_emits_one_episode_per_window_of_n_exchanges():
    gate = FormationGate(every_n_messages=3)
    assert gate.offer(_turn(1)) is None and gate.offer(_turn(2)) is None
    window = gate.offer(_turn(3))
    assert window.content == "turn 1\nturn 2\nturn 3" and window.response == "reply 1\nreply 2\nreply 3"


def test_window_episode_id_is_stable_for_a_replayed_window():
    a, b = FormationGate(every_n_messages=2), FormationGate(every_n_messages=2)
    a.offer(_turn(1)); b.offer(_turn(1))
    assert a.offer(_turn(2)).episode_id == b.offer(_turn(2)).episode_id


def test_token_gate_opens_when_the_buffered_text_is_long_enough():
    gate = FormationGate(every_n_messages=100, every_n_tokens=10)
    assert gate.offer(_turn(1)) is None
    long = _turn(2).model_copy(update={"content": "x" * 80})
    assert gate.offer(long) is not None


def test_sessions_are_gated_separately_per_channel():
    gate = FormationGate(every_n_messages=2)
    gate.offer(_turn(1, "a"))
    assert gate.offer(_turn(2, "b")) is None


def test_cold_session_is_swept_into_an_episode():
    gate = FormationGate(every_n_messages=5, cold_after_s=60)
    gate.offer(_turn(1), now=0)
    assert gate.sweep(now=30) == []
    assert [e.content for e in gate.sweep(now=61)] == ["turn 1"]


@pytest.mark.anyio
async def test_buffered_exchanges_are_flushed_when_the_plugin_drains(settings):
    settings = settings.model_copy(update={"memory": settings.memory.model_copy(update={"form_every_n_messages": 5})})
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"plugin", "worker"},
                                                     plugins=[MemoryPlugin(), EchoExecutor("echo")],
                                                     task_status=task_status))
            await ask(rt, request("first"))
            await ask(rt, request("second"))
            await settle_behind_a_sentinel(rt.bus, rt.engine.store)
            assert await rt.engine.store.count_episodes("user_josh") == 0
            rt.stop.set()
        # the worker stopped with the plugin; the flushed window waits in the stream
        info = await rt.bus.js.stream_info("MEMORY_EPISODES")
        assert info.state.messages == 3  # one window per group (user_josh, agent_echo__user_josh) and the sentinel
