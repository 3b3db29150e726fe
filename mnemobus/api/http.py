"""The Graphiti-compatible HTTP API: same paths, field names and status codes as Graphiti's service.

FastAPI because Graphiti's own service is FastAPI: request validation
answers 422 in the same `{"detail": [...]}` shape, and `/openapi.json`
comes from the same models the handlers use, so the document cannot drift
from the code. Where Graphiti accepts what it later fails on (a bad group
id, a malformed client uuid), we answer 422 with the reason instead;
docs/api.md lists every difference.
"""

from __future__ import annotations

import logging

from typing import Annotated, Any

import anyio

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response

from mnemobus import __version__
from mnemobus.api.callers import WrongKey, caller_of, proven_actor
from mnemobus.api.core import Forbidden, MemoryService, NotFound, message_query
from mnemobus.api.erasure_rights import clear_as, delete_group_as
from mnemobus.api.gdpr import AuditEvent, hard_delete_user
from mnemobus.api.graph_upkeep import GraphStatsResult, graph_stats
from mnemobus.api.guards import ErrorGuard, json_bytes
from mnemobus.api.lifecycle_http import add_lifecycle_routes
from mnemobus.api.models import (
    AcceptedResult,
    AddEntityNodeRequest,
    AddMessagesRequest,
    EntityResult,
    ErrorDetail,
    GroupIdField,
    DeleteResult,
    EpisodeResult,
    FactResult,
    GetMemoryRequest,
    GetMemoryResponse,
    HealthResult,
    SearchQuery,
    SearchResults,
)
from mnemobus.api.nats_service import error_reply
from mnemobus.graphio.page import content_security_policy, page_html
from mnemobus.shared.errors import EntityExists, InvalidMessage, StoreCorrupt, StoreUnavailable
from mnemobus.shared.limits import MAX_HTTP_BODY_BYTES

log = logging.getLogger("mnemobus.api.http")


#: the graph page is private memory (never cached) that must not reach the network or be framed
PAGE_HEADERS = {"Content-Security-Policy": content_security_policy() + "; frame-ancestors 'none'",
                "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}

#: the error answers every operation may give, documented in /openapi.json with their one shape
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorDetail, "description": why} for code, why in (
        (401, "missing or wrong API key"),
        (403, "the key's owner may not do this (erasing: admins, or a user their own group)"), (404, "no such fact, episode or entity"),
        (413, "request body over the limit"),
        (422, "the request breaks a rule: the detail names the field and the reason"),
        (500, "unexpected error (logged and counted in mnemobus_http_errors_total)"),
        (503, "store unavailable; retry"), (504, "the memory service did not answer in time"))}


async def _current_service(request: Request) -> MemoryService:
    return request.app.state.service  # type: ignore[no-any-return]


Served = Annotated[MemoryService, Depends(_current_service)]


def create_app(service: MemoryService) -> FastAPI:
    """The app for one service; no globals, so tests and the role each build their own."""
    async def require_key(request: Request, authorization: Annotated[str | None, Header()] = None,
                          x_api_key: Annotated[str | None, Header()] = None) -> None:
        """Who the request proved to be (the owner of its key; never a bus role: HTTP is not the bus)."""
        try:
            request.state.caller = caller_of(request.app.state.service.config, authorization, x_api_key)
        except WrongKey:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong API key",
                                headers={"WWW-Authenticate": "Bearer"}) from None

    # No Swagger/ReDoc pages: they load their scripts from a CDN, which a memory service on a
    # closed network cannot reach; /openapi.json is the contract and works offline.
    app = FastAPI(title="mnemobus memory API", version=__version__, docs_url=None, redoc_url=None,
                  description="Graphiti-compatible REST API over the mnemobus memory service.",
                  max_body_size=MAX_HTTP_BODY_BYTES, responses=ERROR_RESPONSES)
    app.state.service = service  # endpoints take it from the request: FastAPI caches endpoint functions for
    # the process's life, and a closure over the service would keep every runtime an app was built for alive
    http_errors = service.rt.metrics.http_errors
    app.add_middleware(ErrorGuard, on_error=lambda kind: http_errors.labels(kind=kind).inc())
    guarded = [Depends(require_key)]

    @app.exception_handler(RequestValidationError)
    async def _unprocessable(_: Request, exc: RequestValidationError) -> Response:
        # FastAPI's own handler fails with a 500 when the offending input holds a lone surrogate
        return Response(json_bytes({"detail": jsonable_encoder(exc.errors())}), status_code=422,
                        media_type="application/json")

    @app.exception_handler(InvalidMessage)
    async def _invalid(_: Request, exc: InvalidMessage) -> Response:
        return Response(json_bytes({"detail": f"{exc.reason}: {exc.detail}"}), status_code=422,
                        media_type="application/json")

    @app.exception_handler(NotFound)
    async def _missing(_: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(Forbidden)
    async def _forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=403)

    @app.exception_handler(EntityExists)
    async def _exists(_: Request, exc: EntityExists) -> Response:
        return Response(json_bytes({"detail": str(exc), "uuid": exc.entity_id}), status_code=409,
                        media_type="application/json")

    @app.exception_handler(StoreUnavailable)
    async def _unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        _, code, detail = error_reply(exc)  # the status and words the NATS service and MCP answer too
        if isinstance(exc, StoreCorrupt):  # no retry mends it: a 503's Retry-After would only bring the caller back
            log.error("store damaged, answered %s: %s", code, exc)
            http_errors.labels(kind="StoreCorrupt").inc()
            return JSONResponse({"detail": detail}, status_code=int(code))
        return JSONResponse({"detail": detail}, status_code=int(code), headers={"Retry-After": "1"})

    @app.exception_handler(TimeoutError)
    async def _timeout(_: Request, exc: TimeoutError) -> JSONResponse:
        return JSONResponse({"detail": "the memory service did not answer in time"}, status_code=504)

    @app.get("/healthcheck", response_model=HealthResult)
    async def healthcheck(service: Served) -> JSONResponse:
        """Graphiti's exact body when healthy; the reason only when not (a 503), for whoever is paged."""
        ok, why = await service.health()
        if ok:
            return JSONResponse({"status": "healthy"})
        return JSONResponse(HealthResult(status="unhealthy", store=why).model_dump(), status_code=503)

    @app.post("/messages", status_code=202, response_model=AcceptedResult, dependencies=guarded)
    async def add_messages(req: AddMessagesRequest, service: Served) -> AcceptedResult:
        ids = await service.add_messages(req.group_id, req.messages)
        return AcceptedResult(message="Messages added to processing queue", success=True, episode_uuids=ids)

    @app.post("/search", response_model=SearchResults, dependencies=guarded)
    async def search(query: SearchQuery, service: Served) -> SearchResults:
        found = await service.search(query.group_ids, query.query, query.max_facts, query.as_of,
                                     episodes=query.include_episodes)
        return SearchResults(facts=FactResult.ranked(found))

    @app.post("/get-memory", response_model=GetMemoryResponse, dependencies=guarded)
    async def get_memory(req: GetMemoryRequest, service: Served) -> GetMemoryResponse:
        found = await service.search([req.group_id], message_query(req.messages), req.max_facts,
                                     episodes=req.include_episodes)
        return GetMemoryResponse(facts=FactResult.ranked(found))

    @app.get("/episodes/{group_id}", response_model=list[EpisodeResult], dependencies=guarded)
    async def episodes(group_id: GroupIdField, last_n: Annotated[int, Query(ge=1, le=1000)],
                       service: Served) -> list[EpisodeResult]:
        # the last_n newest, oldest first: Graphiti's retrieve_episodes reverses its newest-first query
        return [EpisodeResult.of(e) for e in reversed(await service.episodes(group_id, last_n))]

    @app.get("/graph/{group_id}", response_class=HTMLResponse, dependencies=guarded,
             responses={200: {"content": {"text/html": {}}, "description": "the group as one offline page"}})
    async def graph_page(group_id: GroupIdField, service: Served) -> HTMLResponse:
        """mnemobus addition: the group's entities and facts as one self-contained page (docs/graphio.md)."""
        page = await anyio.to_thread.run_sync(page_html, await service.group_export(group_id))
        return HTMLResponse(page, headers=PAGE_HEADERS)

    @app.get("/graph/{group_id}/stats", response_model=GraphStatsResult, dependencies=guarded)
    async def graph_stats_of(group_id: GroupIdField, service: Served) -> GraphStatsResult:
        """mnemobus addition: the group's size, communities and upkeep, as `memory.api.graph.stats` answers."""
        return await graph_stats(service, group_id)

    @app.get("/entity-edge/{uuid}", response_model=FactResult, dependencies=guarded)
    async def get_entity_edge(uuid: str, service: Served) -> FactResult:
        return FactResult.of_edge(await service.locate_edge(uuid))

    @app.delete("/entity-edge/{uuid}", response_model=DeleteResult, dependencies=guarded)
    async def delete_entity_edge(uuid: str, service: Served) -> DeleteResult:
        c = await service.delete_fact(uuid)
        return DeleteResult(message="Entity Edge deleted", success=True, facts=c.facts)

    @app.post("/entity-node", status_code=201, response_model=EntityResult, dependencies=guarded,
              responses={409: {"model": ErrorDetail, "description": "the name or id is already an entity"}})
    async def add_entity_node(req: AddEntityNodeRequest, service: Served) -> EntityResult:
        return EntityResult.of(await service.add_entity(req.group_id, req.uuid, req.name, req.summary))

    @app.delete("/group/{group_id}", response_model=DeleteResult, dependencies=guarded)
    async def delete_group(group_id: GroupIdField, request: Request, service: Served) -> DeleteResult:
        """For an admin's key, or the key of the group's own user (api/erasure_rights.py); audited."""
        c = await delete_group_as(service, request.state.caller, group_id)
        return DeleteResult(message="Group deleted", success=True, episodes=c.episodes, entities=c.entities,
                            facts=c.facts)

    @app.delete("/episode/{uuid}", response_model=DeleteResult, dependencies=guarded)
    async def delete_episode(uuid: str, service: Served) -> DeleteResult:
        c = await service.delete_episode(uuid)
        return DeleteResult(message="Episode deleted", success=True, episodes=c.episodes, entities=c.entities,
                            facts=c.facts)

    @app.delete("/user/{user_id}", response_model=AuditEvent, dependencies=guarded,
                responses={403: {"model": ErrorDetail, "description": "the key's owner is no admin, or the key "
                                                                         "has no owner (api.api_key)"}})
    async def delete_user(user_id: Annotated[str, Path(min_length=1, max_length=64)], request: Request,
                          service: Served) -> AuditEvent:
        """mnemobus addition: erase a user (GDPR), acting as the owner of the API key (`api.keys`)."""
        actor, proof = proven_actor(request.state.caller, None)
        return await hard_delete_user(service, user_id, actor=actor, proof=proof)

    @app.post("/clear", response_model=DeleteResult, dependencies=guarded)
    async def clear(request: Request, service: Served) -> DeleteResult:
        """For an admin's key only (api/erasure_rights.py); audited."""
        c = await clear_as(service, request.state.caller)
        return DeleteResult(message="Graph cleared", success=True, episodes=c.episodes, entities=c.entities,
                            facts=c.facts)

    add_lifecycle_routes(app, guarded)
    return app
