"""The memory service as Model Context Protocol tools, for agents that are not on the bus.

Every tool validates its arguments into the same request model the NATS API takes and runs the same
operation (`nats_service.operations`), so the MCP door cannot drift from the other two. A failure comes back
as an MCP tool error whose text names the problem and the status the HTTP API would have answered; the server
keeps serving.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from anyio.abc import TaskStatus
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import BaseModel, Field, ValidationError

from mnemobus.api.callers import Caller as ProvenCaller, current_caller
from mnemobus.api.core import MemoryService
from mnemobus.api.nats_service import error_reply, operations
from mnemobus.shared.config import Settings
from mnemobus.shared.errors import ConfigError
from mnemobus.shared.metrics import PipelineMetrics

if TYPE_CHECKING:
    from mnemobus.kernel.runtime import Runtime

log = logging.getLogger("mnemobus.mcp")

INSTRUCTIONS = """\
Long-term memory shared with the agents on this platform. Each memory belongs to a group (for example a user,
`user_42`, or a project): pass the group ids you were given, never invent one. Store what is worth remembering
with add_memory (one message per call, in the words it was said); before answering, search_memory with a
question-like query to recall facts and the messages they came from, best first. Facts carry valid_at and
invalid_at: a fact with invalid_at set is no longer true.
"""

GroupIdArg = Annotated[str, Field(description="the memory group, e.g. `user_42`: letters, digits, '_' and '-'")]
TimeArg = Annotated[datetime | None, Field(description="ISO 8601 time with a zone, e.g. 2026-03-01T12:00:00Z")]


@dataclass(frozen=True)
class Caller:
    name: str
    admin: bool
    user: str | None = None  # the users.yaml user a client's token acts as (mcp.clients[].user)


class Unauthorized(Exception):
    """No token, or one that is not configured."""


def caller_from(headers: Mapping[str, str] | None, settings: Settings) -> Caller:
    """Who is calling: over stdio (no headers) the local user; over HTTP whoever the bearer token names."""
    if headers is None:
        return Caller("stdio", settings.mcp.stdio_admin)
    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    if given:
        if (key := settings.api.api_key) is not None and secrets.compare_digest(given.encode(),
                                                                              key.get_secret_value().encode()):
            return Caller("api-key", False)  # shared by every client: lets one in, proves no one (as over HTTP)
        for client in settings.mcp.clients:
            if secrets.compare_digest(given.encode(), client.token.get_secret_value().encode()):
                return Caller(client.name, client.admin, client.user)
    raise Unauthorized("missing or unknown bearer token")


def has_http_credentials(settings: Settings) -> bool:
    return settings.api.api_key is not None or bool(settings.mcp.clients)


def _described(exc: ValidationError) -> str:
    """`422: <field>: <why>; ...`, the text every door's refusal of bad arguments starts with."""
    return "422: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False))


class _Door(MCPServer):
    """The SDK's server, except that arguments of the wrong type (refused by the SDK against the tool's signature,
    before our code runs) are answered and counted like every other bad argument: `422: <field>: <why>`."""

    metrics: PipelineMetrics | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, UnexpectedToolError):
                _count(self.metrics, name, "invalid")
                raise ToolError(f"Error executing tool {name}: {_described(exc.__cause__)}") from exc.__cause__
            raise


def build_server(svc: MemoryService, settings: Settings, metrics: PipelineMetrics | None = None) -> MCPServer:
    ops = operations(svc)
    # the SDK sets up logging only when the process has none yet (a bench, a test); `mnemobus` has by then
    server = _Door(name="mnemobus", instructions=INSTRUCTIONS, log_level=settings.log_level)
    server.metrics = metrics

    async def run(tool: str, endpoint: str, args: dict[str, Any], ctx: Context | None,
                  admin: bool = False) -> dict[str, Any]:
        try:
            caller = caller_from(ctx.headers if ctx is not None else None, settings)
        except Unauthorized as exc:
            _count(metrics, tool, "unauthorized")
            raise ToolError(f"401: {exc}") from None
        if admin and not caller.admin:
            _count(metrics, tool, "forbidden")
            raise ToolError(f"403: {tool} is for admin clients; {caller.name!r} is not one")
        model, op = ops[endpoint]
        # the operation reads who asks from current_caller (an erasure checks and audits it): this door's own proof
        # (an admin token is its own proof; a non-admin one proves the users.yaml user it acts as, if any)
        proven = current_caller.set(ProvenCaller(mcp_admin=caller.name if caller.admin else None,
                                                 owner=None if caller.admin else caller.user, mcp_client=caller.name))
        try:
            reply: BaseModel = await op(model.model_validate({k: v for k, v in args.items() if v is not None}))
        except ValidationError as exc:
            _count(metrics, tool, "invalid")
            raise ToolError(_described(exc)) from None
        except Exception as exc:
            outcome, code, reason = error_reply(exc)
            _count(metrics, tool, outcome)
            if outcome == "error":
                log.warning("mcp tool %s failed: %s", tool, reason)
            raise ToolError(f"{code}: {reason}") from None
        finally:
            current_caller.reset(proven)
        _count(metrics, tool, "ok")
        return reply.model_dump(mode="json")

    @server.tool()
    async def add_memory(group_id: GroupIdArg, content: Annotated[str, Field(description="the message, as said")],
                         role_type: Literal["user", "assistant", "system"] = "user",
                         speaker: Annotated[str | None, Field(description="who said it, e.g. `Ana`; first person "
                                                              "in the content is this speaker")] = None,
                         name: Annotated[str, Field(description="a name for the episode, shown back as given")] = "",
                         source_description: Annotated[str, Field(description="where it came from, e.g. "
                                                                  "`slack #ops`")] = "",
                         reference_time: TimeArg = None,
                         uuid: Annotated[str | None, Field(description="your id for the message: the same id "
                                                           "twice in one group is stored once")] = None,
                         ctx: Context | None = None) -> dict[str, Any]:
        """Remember one message. It is queued durably and turned into entities and facts within seconds;
        answers the episode uuid. reference_time is when it was said (default now): relative times in the
        content ("yesterday", "next March") are read against it."""
        message = {"content": content, "role_type": role_type, "role": speaker, "name": name,
                   "source_description": source_description, "timestamp": reference_time, "uuid": uuid}
        return await run("add_memory", "messages", {"group_id": group_id,
                                                    "messages": [{k: v for k, v in message.items() if v is not None}]},
                         ctx)

    @server.tool()
    async def search_memory(query: Annotated[str, Field(description="what you want to recall, as a question or "
                                                        "keywords")],
                            group_ids: Annotated[list[str], Field(description="the groups to search")],
                            max_results: Annotated[int, Field(ge=1, le=100)] = 10,
                            as_of: TimeArg = None, include_messages: bool = True,
                            ctx: Context | None = None) -> dict[str, Any]:
        """Facts and the stored messages they came from, in one ranking, best first. Each item has `fact` (the
        text), `kind` (`fact` or `episode` for a message), `score`, `valid_at`/`invalid_at` (when it held) and
        `episodes`/`source_message_ids` (where it came from). as_of asks what was true at that time."""
        return await run("search_memory", "search", {"query": query, "group_ids": group_ids,
                                                     "max_facts": max_results, "as_of": as_of,
                                                     "include_episodes": include_messages}, ctx)

    @server.tool()
    async def search_entities(group_id: GroupIdArg, query: str,
                              max_results: Annotated[int, Field(ge=1, le=100)] = 10,
                              ctx: Context | None = None) -> dict[str, Any]:
        """People, places, organisations, pets, products and events the group's memory knows, by name or
        description; each with its uuid, type, aliases and summary."""
        return await run("search_entities", "entities", {"group_id": group_id, "query": query,
                                                         "limit": max_results}, ctx)

    @server.tool()
    async def entity_neighbourhood(group_id: GroupIdArg,
                                   entity: Annotated[str, Field(description="an entity's name or uuid")],
                                   max_hops: Annotated[int, Field(ge=1, le=6)] = 2,
                                   relations: Annotated[list[str] | None, Field(description="only these "
                                                                                "relations, e.g. works_at")] = None,
                                   as_of: TimeArg = None, max_results: Annotated[int, Field(ge=1, le=500)] = 20,
                                   ctx: Context | None = None) -> dict[str, Any]:
        """The facts around an entity, walking up to max_hops relations out; each with the hop it was found at."""
        return await run("entity_neighbourhood", "traverse", {
            "group_id": group_id, "entity": entity, "max_hops": max_hops, "relations": relations, "as_of": as_of,
            "limit": max_results}, ctx)

    @server.tool()
    async def fact_history(group_id: GroupIdArg, entity: Annotated[str, Field(description="an entity's name")],
                           relation: Annotated[str | None, Field(description="e.g. lives_in; all when "
                                                                 "omitted")] = None,
                           ctx: Context | None = None) -> dict[str, Any]:
        """Every version of an entity's facts, oldest first, ended ones included: how what was known changed."""
        return await run("fact_history", "history", {"group_id": group_id, "entity": entity, "relation": relation},
                         ctx)

    @server.tool()
    async def graph_as_of(group_id: GroupIdArg, as_of: datetime,
                          max_results: Annotated[int, Field(ge=1, le=10_000)] = 200,
                          ctx: Context | None = None) -> dict[str, Any]:
        """Every fact of the group that was true at the given time."""
        return await run("graph_as_of", "as-of", {"group_id": group_id, "as_of": as_of, "limit": max_results}, ctx)

    @server.tool()
    async def get_episodes(group_id: GroupIdArg, last_n: Annotated[int, Field(ge=1, le=1000)] = 10,
                           ctx: Context | None = None) -> dict[str, Any]:
        """The group's most recent stored messages, newest first."""
        return await run("get_episodes", "episodes", {"group_id": group_id, "last_n": last_n}, ctx)

    @server.tool()
    async def delete_episode(uuid: Annotated[str, Field(description="the episode's uuid")],
                             ctx: Context | None = None) -> dict[str, Any]:
        """Forget one stored message and what only it supported."""
        return await run("delete_episode", "delete-episode", {"uuid": uuid}, ctx)

    @server.tool()
    async def delete_fact(uuid: Annotated[str, Field(description="the fact's uuid")],
                          ctx: Context | None = None) -> dict[str, Any]:
        """Forget one fact; a fact it had ended is true again."""
        return await run("delete_fact", "delete-fact", {"uuid": uuid}, ctx)

    @server.tool()
    async def promote_memory(
            text: Annotated[str, Field(description="what must never be forgotten, in the words it was said")],
            kind: Annotated[Literal["decision", "lesson", "preference", "procedure"], Field(description="what it is")],
            scope: Annotated[Literal["user", "workspace", "session"], Field(
                description="user: all of the user's memory; workspace: the user's with one agent; session: one "
                            "conversation")] = "user",
            user_id: Annotated[str | None, Field(description="whose memory (a user of users.yaml); default: the "
                                                             "user this client acts as")] = None,
            agent_id: Annotated[str | None, Field(description="scope workspace: the agent")] = None,
            session: Annotated[str | None, Field(description="scope session: the conversation (channel id)")] = None,
            ctx: Context | None = None) -> dict[str, Any]:
        """Mark a memory as one that must never be forgotten: it is recalled first, never decays and is never
        evicted. Who may: an admin client for any user; another client only into the memory of the user its
        token acts as (as /memory clear decides who may erase)."""
        return await run("promote_memory", "promote", {"text": text, "kind": kind, "scope": scope, "user_id": user_id,
                                                       "agent_id": agent_id, "session": session}, ctx)

    @server.tool()
    async def list_promoted(group_id: GroupIdArg, ctx: Context | None = None) -> dict[str, Any]:
        """The group's promoted memories (never forgotten), oldest first, with kind, scope, author and time."""
        return await run("list_promoted", "promoted", {"group_id": group_id}, ctx)

    @server.tool()
    async def clear_group(group_id: GroupIdArg, ctx: Context | None = None) -> dict[str, Any]:
        """Erase everything the group holds, including messages still queued. Admin clients only; it cannot be
        undone."""
        return await run("clear_group", "delete-group", {"group_id": group_id}, ctx, admin=True)

    return server


def _count(metrics: PipelineMetrics | None, tool: str, outcome: str) -> None:
    if metrics is not None:
        metrics.mcp_calls.labels(tool=tool, outcome=outcome).inc()


Asgi = Callable[[dict[str, Any], Callable[[], Awaitable[Any]], Callable[[dict[str, Any]], Awaitable[None]]],
                Awaitable[None]]


def require_token(app: Asgi, settings: Settings) -> Asgi:
    """Refuse an HTTP request without a configured bearer token before the MCP session sees it (401)."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
            try:
                caller_from(headers, settings)
            except Unauthorized as exc:
                body = f'{{"detail": "{exc}"}}'.encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


#: Runtime.extra key holding the streamable HTTP endpoint's URL once it serves
EXTRA_MCP_URL = "mcp.url"


async def run_mcp_http(rt: "Runtime", *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """The `mcp` role: streamable HTTP until `rt.stop` is set, then the open calls finish."""
    from mnemobus.api.service import start_http
    from mnemobus.kernel.warming import warm_engine

    settings = rt.settings
    if not has_http_credentials(settings):
        raise ConfigError("mcp: streamable HTTP needs a token: set mcp.clients (name, token) or api.api_key; "
                          "`mnemobus mcp` serves stdio without one")
    server = build_server(MemoryService.of(rt, settings.api), settings, rt.metrics)
    app = require_token(server.streamable_http_app(streamable_http_path=settings.mcp.path, host=settings.mcp.host),
                        settings)
    async with anyio.create_task_group() as tg:
        tg.start_soon(warm_engine, rt.engine)  # beside serving: a handshake never waits for a first table build
        http, url = await start_http(tg, app, settings.mcp.host, settings.mcp.port,
                                     drain_timeout_s=settings.api.drain_timeout_s, lifespan="on")
        try:
            rt.extra[EXTRA_MCP_URL] = url + settings.mcp.path
            log.info("MCP (streamable HTTP) on %s", rt.extra[EXTRA_MCP_URL])
            task_status.started()
            await rt.stop.wait()
        finally:  # cancelled or stopped: the shielded server drains its open calls and its lifespan, then returns
            http.should_exit = True


async def run_mcp_stdio(rt: "Runtime") -> None:
    """`mnemobus mcp`: the tools on stdin/stdout until the client closes stdin."""
    await build_server(MemoryService.of(rt, rt.settings.api), rt.settings, rt.metrics).run_stdio_async()
