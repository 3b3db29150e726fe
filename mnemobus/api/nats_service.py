"""The memory service over NATS: `memory.api.<endpoint>` request-reply, on the `nats.micro` service API.

`nats.micro` gives us, for free, a queue group per endpoint (so instances
share load), and `$SRV.PING|INFO|STATS.mnemobus-memory` with per-endpoint
request, error and latency counts. Bodies are the same JSON models as the
HTTP API; an error answer carries `Nats-Service-Error-Code` (the HTTP status
it would have had: 401, 404, 422, 503, 504) and `Nats-Service-Error`.

nats-py runs a subscription's callbacks one at a time, so each handler hands
the request to the role's task group under a per-endpoint limiter and
returns: the `$SRV.STATS` request counts are exact, while outcomes and
latency are recorded where the work finishes, in the process's registry
(`mnemobus_messages_total` / `mnemobus_handler_seconds`, endpoint `api.<name>`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from pydantic import BaseModel, ValidationError

from mnemobus import __version__
from mnemobus.shared import subjects
from mnemobus.api import models as m
from mnemobus.api.commands import CommandReply, run_command
from mnemobus.api.core import Forbidden, MemoryService, NotFound
from mnemobus.api.gdpr import hard_delete_user
from mnemobus.api.lifecycle import history_note, lifecycle_operations
from mnemobus.api.graph_upkeep import upkeep_operations
from mnemobus.api.callers import WrongKey, caller_of, current_caller, proven_actor
from mnemobus.api.erasure_rights import delete_group_as
from mnemobus.bus.endpoint import describe_validation_error
from mnemobus.bus.micro import MicroService, ServiceRequest, reply_subject
from mnemobus.bus.permissions import forged_reply
from mnemobus.shared.envelope import SkillRequest, WireModel
from mnemobus.shared.errors import EntityExists, InvalidMessage, StoreCorrupt, StoreUnavailable

log = logging.getLogger("mnemobus.api.nats")

SERVICE_NAME = "mnemobus-memory"
QUEUE = "memory-api"

Op = Callable[[Any], Awaitable[BaseModel]]


class ApiError(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _parse(model: type[BaseModel], data: bytes) -> Any:
    try:
        return model.model_validate_json(data or b"{}")
    except ValidationError as exc:
        raise ApiError(422, describe_validation_error(exc)) from exc


def error_reply(exc: Exception) -> tuple[str, str, str]:
    """(outcome for the metrics, the HTTP status it would have been, the reason) for a failed request."""
    if isinstance(exc, ApiError):
        return "invalid", str(exc.code), exc.detail
    if isinstance(exc, InvalidMessage):
        return "invalid", "422", f"{exc.reason}: {exc.detail}"
    for kind, code in ((Forbidden, "403"), (NotFound, "404"), (EntityExists, "409")):
        if isinstance(exc, kind):
            return "invalid", code, str(exc)
    if isinstance(exc, StoreCorrupt):  # a repair mends it, not a retry (`mnemobus doctor --repair`)
        return "error", "500", f"store damaged: {exc}"
    if isinstance(exc, StoreUnavailable):
        return "error", "503", f"store unavailable: {exc}"
    if isinstance(exc, TimeoutError):
        return "error", "504", "the memory service did not answer in time"
    return "error", "500", f"{type(exc).__name__}: {exc}"


def operations(svc: MemoryService) -> dict[str, tuple[type[BaseModel], Op]]:
    """endpoint name -> (request model, coroutine producing the reply model)."""

    async def search(q: m.SearchQuery) -> BaseModel:
        found = await svc.search(q.group_ids, q.query, q.max_facts, q.as_of, episodes=q.include_episodes)
        return m.SearchResults(facts=m.FactResult.ranked(found))

    async def get_memory(q: m.GetMemoryRequest) -> BaseModel:
        from mnemobus.api.core import message_query

        found = await svc.search([q.group_id], message_query(q.messages), q.max_facts, episodes=q.include_episodes)
        return m.GetMemoryResponse(facts=m.FactResult.ranked(found))

    async def add_messages(q: m.AddMessagesRequest) -> BaseModel:
        ids = await svc.add_messages(q.group_id, q.messages)
        return m.AcceptedResult(message="Messages added to processing queue", success=True, episode_uuids=ids)

    async def episodes(q: m.EpisodesRequest) -> BaseModel:
        return m.EpisodesResult(episodes=[m.EpisodeResult.of(e) for e in await svc.episodes(q.group_id, q.last_n)])

    async def fact(q: m.ByIdRequest) -> BaseModel:
        return m.FactResult.of_edge(await svc.locate_edge(q.uuid))

    async def entity(q: m.EntityByIdRequest) -> BaseModel:
        return m.EntityResult.of(await svc.entity(q.group_id, q.uuid))

    async def entities(q: m.EntitySearchRequest) -> BaseModel:
        found = await svc.search_entities(q.group_id, q.query, q.limit)
        return m.EntitiesResult(entities=[m.EntityResult.of(e) for e in found])

    async def traverse(q: m.TraverseRequest) -> BaseModel:
        hops = await svc.traverse(q.group_id, q.entity, relations=q.relations, max_hops=q.max_hops,
                                  limit=q.limit, as_of=q.as_of)
        return m.HopsResult(hops=[m.HopResult(hop=h.hop, fact=m.FactResult.of(h.fact)) for h in hops])

    async def as_of(q: m.AsOfRequest) -> BaseModel:
        return m.FactsResult(facts=[m.FactResult.of(f) for f in await svc.facts_as_of(q.group_id, q.as_of, q.limit)],
                             **await history_note(svc, q.group_id, q.as_of))

    async def history(q: m.HistoryRequest) -> BaseModel:
        return m.FactsResult(facts=[m.FactResult.of(f) for f in await svc.history(q.group_id, q.entity, q.relation)],
                             **await history_note(svc, q.group_id, None))

    async def delete_group(q: m.DeleteGroupRequest) -> BaseModel:
        c = await delete_group_as(svc, current_caller.get(), q.group_id)
        return m.DeleteResult(message="Group deleted", success=True, episodes=c.episodes, entities=c.entities,
                              facts=c.facts)

    async def delete_episode(q: m.ByIdRequest) -> BaseModel:
        c = await svc.delete_episode(q.uuid)
        return m.DeleteResult(message="Episode deleted", success=True, episodes=c.episodes, entities=c.entities,
                              facts=c.facts)

    async def delete_fact(q: m.ByIdRequest) -> BaseModel:
        c = await svc.delete_fact(q.uuid)
        return m.DeleteResult(message="Fact deleted", success=True, facts=c.facts)

    async def entity_node(q: m.AddEntityNodeRequest) -> BaseModel:
        return m.EntityResult.of(await svc.add_entity(q.group_id, q.uuid, q.name, q.summary))

    async def delete_user(q: m.DeleteUserRequest) -> BaseModel:
        actor, proof = proven_actor(current_caller.get(), q.actor)
        return await hard_delete_user(svc, q.user_id, actor=actor, proof=proof)

    async def health(_: m.Body) -> BaseModel:
        ok, why = await svc.health()
        return m.HealthResult(status="healthy" if ok else "unhealthy", store=why)

    async def status(_: m.Body) -> BaseModel:
        doc = svc.status()
        return m.StatusResult(available=doc is not None, document=doc)

    async def command(q: SkillRequest) -> CommandReply:
        return await run_command(svc, q)

    return {
        "search": (m.SearchQuery, search),
        "get-memory": (m.GetMemoryRequest, get_memory),
        "messages": (m.AddMessagesRequest, add_messages),
        "episodes": (m.EpisodesRequest, episodes),
        "fact": (m.ByIdRequest, fact),
        "entity": (m.EntityByIdRequest, entity),
        "entities": (m.EntitySearchRequest, entities),
        "traverse": (m.TraverseRequest, traverse),
        "as-of": (m.AsOfRequest, as_of),
        "history": (m.HistoryRequest, history),
        "delete-group": (m.DeleteGroupRequest, delete_group),
        "delete-episode": (m.ByIdRequest, delete_episode),
        "delete-fact": (m.ByIdRequest, delete_fact),
        "entity-node": (m.AddEntityNodeRequest, entity_node),
        "delete-user": (m.DeleteUserRequest, delete_user),
        "health": (m.Body, health),
        "status": (m.Body, status),
        "command": (SkillRequest, command),
        **lifecycle_operations(svc),
        **upkeep_operations(svc),
    }


class NatsApi:
    """The micro service plus the bookkeeping to drain it: stop taking requests, finish the ones in flight."""

    def __init__(self, svc: MemoryService, tg: TaskGroup) -> None:
        self.svc = svc
        self.tg = tg
        self.service = MicroService(svc.rt.bus)
        self.accepting = True
        self._inflight = 0
        self._idle = anyio.Event()
        self._idle.set()
        self._limiters: dict[str, anyio.CapacityLimiter] = {}

    async def start(self) -> None:
        await self.service.start(name=SERVICE_NAME, version=__version__, queue=QUEUE,
                                 description="mnemobus memory service (Graphiti-compatible bodies)")
        for name, (model, op) in operations(self.svc).items():
            self._limiters[name] = anyio.CapacityLimiter(self.svc.config.max_inflight)
            await self.service.add_endpoint(name, subjects.api(name), self._handler(name, model, op))

    def _handler(self, name: str, model: type[BaseModel], op: Op) -> Callable[[ServiceRequest], Awaitable[None]]:
        async def handle(req: ServiceRequest) -> None:
            if (role := forged_reply(req.subject, reply_subject(req))) is not None:
                self.svc.rt.metrics.messages.labels(endpoint=f"api.{name}", outcome="forged_reply").inc()
                log.warning("not answering a %s request whose reply subject is the %s role's inbox (a role that "
                            "cannot send it): someone else named that inbox", name, role)
                return
            if not self.accepting:
                await req.respond_error("503", "memory service is stopping; retry")
                return
            limiter = self._limiters[name]
            token = object()
            await limiter.acquire_on_behalf_of(token)  # waiting here leaves the rest queued: backpressure
            if self._inflight == 0:
                self._idle = anyio.Event()
            self._inflight += 1
            self.tg.start_soon(self._run, name, model, op, req, limiter, token)

        return handle

    def _check_key(self, req: ServiceRequest) -> None:
        """Who the request proved to be, for the operation to read (`current_caller`); 401 for a wrong key."""
        headers = req.headers or {}
        try:
            current_caller.set(caller_of(self.svc.config, headers.get("Authorization"), headers.get("X-API-Key"),
                                         bus_role=self.svc.rt.settings.nats.permissions_enforced))
        except WrongKey as exc:
            raise ApiError(401, str(exc)) from exc

    async def _run(self, name: str, model: type[BaseModel], op: Op, req: ServiceRequest,
                   limiter: anyio.CapacityLimiter, token: object) -> None:
        started = time.perf_counter()
        outcome, failure = "ok", None
        try:
            try:
                self._check_key(req)
                reply = await op(_parse(model, req.data))
            except Exception as exc:  # noqa: BLE001 - every failure becomes an error reply; one never stops the endpoint
                outcome, code, failure = error_reply(exc)
                if code == "500":
                    log.exception("memory api %s failed", name)
                await req.respond_error(code, failure)
            else:
                await req.respond(reply.model_dump_json(by_alias=isinstance(reply, WireModel)).encode())
        except Exception as exc:  # the requester went away; nothing left to tell
            log.warning("could not answer a %s request: %s", name, exc)
        finally:
            elapsed = time.perf_counter() - started
            self.service.record(name, int(elapsed * 1e9), None if failure is None else f"{outcome}: {failure}"[:500])
            metrics = self.svc.rt.metrics
            metrics.messages.labels(endpoint=f"api.{name}", outcome=outcome).inc()
            metrics.handler_seconds.labels(endpoint=f"api.{name}").observe(elapsed)
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()
            limiter.release_on_behalf_of(token)

    async def stop(self) -> None:
        """Refuse new requests, let the running ones answer (up to the drain timeout), then unsubscribe."""
        self.accepting = False
        with anyio.move_on_after(self.svc.config.drain_timeout_s) as scope:
            await self._idle.wait()
        if scope.cancelled_caught:
            log.warning("%d memory api request(s) still running after %ss", self._inflight,
                        self.svc.config.drain_timeout_s)
        await self.service.stop()

