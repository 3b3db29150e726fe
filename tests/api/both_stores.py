"""The worker and the API on each store, SQLite and Neo4j, for tests that must hold on both: a fixture and a
`say` that waits as long as a loaded machine's Neo4j needs."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from mnemobus.api.service import EXTRA_URL, run_api
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.shared.config import ApiSettings, Settings

from tests.api.conftest import Api, wait_for


@pytest.fixture(params=["sqlite", "neo4j"])
async def api_on(request: pytest.FixtureRequest, settings: Settings, group_id: str) -> AsyncIterator[Api]:
    """The worker and the API on one store of each kind; the test's groups (its group_id and any named after it)
    are deleted at the end (Neo4j is shared)."""
    store: dict[str, Any] = settings.store.model_dump()
    if request.param == "neo4j":
        store = {"backend": "neo4j", "neo4j": {"uri": request.getfixturevalue("neo4j_uri")}}
    s = Settings.model_validate({**settings.model_dump(), "store": store})
    async with open_runtime(s) as rt:
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"worker"}, task_status=task_status))
            # a first search on Neo4j loads the group's mirror: seconds on a loaded machine (as the graph-recall doors)
            await tg.start(functools.partial(run_api, rt, api=ApiSettings(port=0, drain_timeout_s=2, search_timeout_s=60)))
            async with httpx.AsyncClient(base_url=rt.extra[EXTRA_URL], timeout=60) as client:
                yield Api(rt, client)
            for made in await rt.engine.store.group_ids():
                if made.startswith(group_id):
                    await rt.engine.store.delete_group(made)
            rt.stop.set()


async def say(api: Api, group: str, content: str) -> None:
    """POST /messages, then wait until the worker has stored it: on Neo4j beside a loaded machine's other tests an
    episode can take longer than the shared helper's ten seconds, and a read before it is stored proves nothing."""
    before = await api.store.count_episodes(group)
    r = await api.http.post("/messages", json={"group_id": group, "messages": [
        {"role_type": "user", "role": "tester", "content": content}]}, headers=api.auth)
    assert r.status_code == 202, r.text
    assert await wait_for(lambda: api.store.count_episodes(group), before + 1, timeout=120) == before + 1


