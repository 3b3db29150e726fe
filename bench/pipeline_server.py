"""The pipeline under test for bench_pipeline: memory plugin + a stub executor, in its own process.

Started by bench_pipeline.py, so the load generator never shares a CPU
schedule or an event loop with the code it measures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mnemobus.kernel.app import open_runtime, serve  # noqa: E402
from mnemobus.kernel import eventloop  # noqa: E402
from mnemobus.kernel.heap import serving_process  # noqa: E402
from mnemobus.shared.config import Settings, load_settings  # noqa: E402
from plugins.echo import EchoExecutor  # noqa: E402
from plugins.memory import MemoryPlugin  # noqa: E402


async def main(settings: Settings) -> None:
    serving_process()  # as `mnemobus run` says it: the bench serves as production does
    async with open_runtime(settings) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"plugin"}, plugins=[MemoryPlugin(), EchoExecutor("bench")],
                                                     task_status=task_status))
            print("READY", flush=True)
            with anyio.open_signal_receiver(15, 2) as signals:
                async for _ in signals:
                    rt.stop.set()
                    break


if __name__ == "__main__":
    settings = load_settings(sys.argv[1])
    eventloop.run(lambda: main(settings), settings.event_loop)  # the loop `mnemobus run` would choose
