"""Through the bus: a plugin process reads the groups it has loaded on its event loop (issue 36), and counts each
recall that had to leave the loop for a worker thread, by reason. The memory is written first by another engine,
as a worker process would write it."""

from datetime import UTC, datetime

import anyio
import pytest

from mnemobus.engine import MemoryEngine
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.kernel.backends import open_engine
from mnemobus.shared.config import Settings
from mnemobus.store.model import Episode, episode_id_for
from mnemobus.store.sqlite.on_loop import REASONS
from plugins.echo import EchoExecutor
from plugins.memory import MemoryPlugin
from tests.pipeline.conftest import ask, request

pytestmark = pytest.mark.anyio


def _left(rt) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return {r: rt.metrics.reads_off_loop.labels(reason=r)._value.get() for r in REASONS}


async def _written_elsewhere(settings: Settings) -> None:
    engine: MemoryEngine = await open_engine(settings)
    said = [Episode(id=episode_id_for(g, "m1", "user"), group_id=g, role="user", source_message_id="m1",
                    content="I moved from Berlin to London.", reference_time=datetime(2026, 5, 1, tzinfo=UTC),
                    channel_id="c1") for g in ("user_josh", "agent_echo__user_josh")]
    for outcome in await engine.ingest_many(said):
        assert not isinstance(outcome, BaseException), outcome
    await engine.close()


async def test_a_plugin_reads_groups_on_a_thread_the_first_time_and_on_its_loop_after(settings: Settings):
    await _written_elsewhere(settings)
    settings = settings.model_copy(update={"memory": settings.memory.model_copy(update={"warm_groups": 0})})
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"plugin"}, plugins=[MemoryPlugin(), EchoExecutor("echo")],
                                                     task_status=task_status))
            first = await ask(rt, request("Where do I live, Berlin or London?"))
            assert first["memory"]["status"] == "enriched" and "London" in first["memory"]["block"]
            assert _left(rt)["cold"] == 1, "the groups' first recall reads them whole, on a worker thread"
            for question in ("Which city did I move to?", "Do I still live in Berlin?"):
                later = await ask(rt, request(question))
                assert later["memory"]["status"] == "enriched" and "London" in later["memory"]["block"]
            assert _left(rt) == {**dict.fromkeys(REASONS, 0.0), "cold": 1.0}, "loaded groups: recall stays on the loop"
            rt.stop.set()
