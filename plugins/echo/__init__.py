"""A built-in executor for demos and tests: answers on `agent.skill.execute.<agent>`.

It stands in for a real agent so `make run` shows the whole path with no LLM:
it tells what it received and how many recalled lines came with it.
"""

from __future__ import annotations

from mnemobus.kernel.hooks import hookimpl
from mnemobus.kernel.plugin import EnrichedRequest, MessageContext, PluginContext, Router, Settings, WireModel, subjects


class ExecutorReply(WireModel):
    content: str | None = None
    error: str | None = None


class EchoExecutor:
    name = "echo-executor"

    def __init__(self, agent_id: str = "echo") -> None:
        self.agent_id = agent_id
        self.router = Router(f"executor-{agent_id}")
        # a queue group: copies of one agent's executor share its requests instead of each answering
        self.router.subscriber(subjects.skill_execute(agent_id), model=EnrichedRequest, queue=f"executor-{agent_id}",
                               name=f"execute_{agent_id}")(self.on_execute)
        self.ctx: PluginContext | None = None

    async def start(self, ctx: PluginContext) -> None:
        self.ctx = ctx

    async def stop(self) -> None:
        self.ctx = None

    async def on_execute(self, req: EnrichedRequest, mctx: MessageContext) -> ExecutorReply:
        original = req.original_content or req.payload.content
        recalled = [line for line in req.memory.block.splitlines() if line.startswith("- ")]
        if self.ctx and self.ctx.echo:
            self.ctx.echo(f"[executor {self.agent_id}] got {original!r} with {len(recalled)} recalled line(s)")
            for line in recalled:
                self.ctx.echo(f"[executor {self.agent_id}]   {line}")
        memory_note = f" I was reminded of {len(recalled)} thing(s)." if recalled else ""
        said = original.strip()
        if not said.endswith((".", "?", "!")):
            said += "."
        return ExecutorReply(content=f"Noted: {said}{memory_note}")


@hookimpl
def mnemobus_bus_plugins(settings: Settings, demo: bool) -> list[EchoExecutor]:
    """Only in the demo: a real deployment has its own executors."""
    return [EchoExecutor("echo")] if demo else []
