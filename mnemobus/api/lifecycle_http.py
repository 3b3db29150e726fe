"""The life-cycle operations on the HTTP API (mnemobus additions, not in Graphiti): promote, promoted, evict."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Request

from mnemobus.api.callers import current_caller
from mnemobus.api.core import MemoryService
from mnemobus.api.lifecycle import (EvictRequest, EvictResult, PromotedList, PromotedResult, PromoteRequest,
                                    delete_promoted, evict, promote, promoted)
from mnemobus.api.models import DeleteResult, ErrorDetail, GroupIdField

_REFUSED = {403: {"model": ErrorDetail, "description": "the actor is not proven, or is neither the user named nor an "
                                                        "admin"}}


def _service(request: Request) -> MemoryService:
    return request.app.state.service  # type: ignore[no-any-return]


Served = Annotated[MemoryService, Depends(_service)]


def add_lifecycle_routes(app: FastAPI, guarded: list[Any]) -> None:
    """Routes on the app `http.create_app` builds, behind the same key check."""

    @app.post("/promote", status_code=201, response_model=PromotedResult, dependencies=guarded, responses=_REFUSED)
    async def promote_memory(req: PromoteRequest, request: Request, svc: Served) -> PromotedResult:
        """Keep a memory for good (never decayed, never evicted), acting as the owner of the API key."""
        current_caller.set(request.state.caller)
        return PromotedResult.of(await promote(svc, req))

    @app.get("/promoted/{group_id}", response_model=PromotedList, dependencies=guarded)
    async def list_promoted(group_id: GroupIdField, svc: Served) -> PromotedList:
        return PromotedList(promoted=[PromotedResult.of(m) for m in await promoted(svc, group_id)])

    @app.delete("/promoted/{group_id}/{uuid}", response_model=DeleteResult, dependencies=guarded)
    async def delete_promoted_memory(group_id: GroupIdField, uuid: Annotated[str, Path(min_length=1, max_length=64)],
                                     svc: Served) -> DeleteResult:
        await delete_promoted(svc, group_id, uuid)
        return DeleteResult(message="Promoted memory deleted", success=True)

    @app.post("/evict", response_model=EvictResult, dependencies=guarded)
    async def evict_now(req: EvictRequest, svc: Served) -> EvictResult:
        """Evict under the configured retention policy now (dry_run: count only)."""
        return await evict(svc, req.group_id, dry_run=req.dry_run)
