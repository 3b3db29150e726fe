"""`mnemobus mcp`: the memory tools over stdio, for an MCP client that launches this command itself."""

from __future__ import annotations

import argparse

import anyio

from mnemobus.shared.config import Settings
from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel import eventloop


async def _serve(settings: Settings) -> int:
    from mnemobus.api.mcp_door import run_mcp_stdio
    from mnemobus.kernel.app import open_runtime, serve
    from mnemobus.kernel.warming import warm_engine

    # the embedder loads beside the handshake, not before it: a first start in a fresh directory builds the
    # static table (20 s or more), and a client waiting that long for `initialize` gives up or looks hung
    async with open_runtime(settings, warm=False) as rt, anyio.create_task_group() as tg:
        tg.start_soon(warm_engine, rt.engine)
        # on a bus this process embeds, nobody else can store what add_memory queues: the worker runs here too; on
        # a running `mnemobus run`'s bus (found through its data directory) or a configured one, its workers do
        roles = {"worker"} if rt.server is not None else set()
        await tg.start(lambda task_status: serve(rt, roles, plugins=[], task_status=task_status))
        await run_mcp_stdio(rt)  # returns when the client closes stdin
        rt.stop.set()
    return 0


@hookimpl
def mnemobus_commands(subcommands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = subcommands.add_parser("mcp", help="serve the memory tools to an MCP client over stdio (logs go to stderr)")
    p.set_defaults(handler=lambda settings, args: eventloop.run(lambda: _serve(settings), settings.event_loop))
