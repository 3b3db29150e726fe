"""takes_medication is one value per condition, end to end on both stores (issue 35): messages in over POST
/messages, through the bus to the worker, facts out of POST /search. A medicine said for a condition replaces only
the one held for that condition; a switch with no condition named is for the condition of the medicine it
replaces; one said for another condition ends nothing (sentences of this file's own)."""

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
from tests.store.conftest import neo4j_uri  # noqa: F401 - the session's Neo4j, for the neo4j half

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "neo4j"])
async def api_on(request: pytest.FixtureRequest, settings: Settings, group_id: str) -> AsyncIterator[Api]:
    """The worker and the API on one store of each kind; the test's group is deleted at the end (Neo4j is shared)."""
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
            await rt.engine.store.delete_group(group_id)
            rt.stop.set()


async def say(api: Api, group: str, content: str) -> None:
    """POST /messages, then wait until the worker has stored it: on Neo4j beside a loaded machine's other tests an
    episode can take longer than the shared helper's ten seconds, and a read before it is stored proves nothing."""
    before = await api.store.count_episodes(group)
    r = await api.http.post("/messages", json={"group_id": group, "messages": [
        {"role_type": "user", "role": "tester", "content": content}]}, headers=api.auth)
    assert r.status_code == 202, r.text
    assert await wait_for(lambda: api.store.count_episodes(group), before + 1, timeout=120) == before + 1


async def medicines(api: Api, group: str) -> dict[str, tuple[str | None, bool]]:
    """The group's medicine facts as stored: medicine -> (qualifier, still held)."""
    export = await api.store.export_group(group)
    return {f.object_name: (f.qualifier, f.invalid_at is None) for f, _ in export.facts
            if f.relation == "takes_medication"}


async def test_a_medicine_said_for_a_condition_is_searched_with_it(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "I'm on ramipril for hypertension.")
    r = await api_on.http.post("/search", json={"group_ids": [group_id], "query": "ramipril hypertension",
                                                "include_episodes": False}, headers=api_on.auth)
    assert r.status_code == 200, r.text
    found = [(f["name"], f["fact"], f["qualifier"]) for f in r.json()["facts"]]
    assert ("takes_medication", "tester takes ramipril for hypertension", "hypertension") in found


async def test_a_switch_ends_the_old_medicine_for_its_condition_only(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "I'm on ramipril for hypertension.")
    await say(api_on, group_id, "Besides that I take gliclazide for diabetes.")
    await say(api_on, group_id, "They switched me from ramipril to candesartan.")
    assert await medicines(api_on, group_id) == {"ramipril": ("hypertension", False),
                                                 "candesartan": ("hypertension", True),
                                                 "gliclazide": ("diabetes", True)}


async def test_a_medicine_for_another_condition_ends_nothing(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "I'm on ramipril for hypertension.")
    await say(api_on, group_id, "Besides that I take gliclazide for diabetes.")
    assert await medicines(api_on, group_id) == {"ramipril": ("hypertension", True),
                                                 "gliclazide": ("diabetes", True)}


async def test_a_new_medicine_for_the_same_condition_replaces_the_old(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "I take gliclazide for diabetes.")
    await say(api_on, group_id, "The nurse put me on insulin for diabetes.")
    assert await medicines(api_on, group_id) == {"gliclazide": ("diabetes", False), "insulin": ("diabetes", True)}


async def test_a_medicine_said_for_no_condition_is_held_beside_the_others(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "I'm on ramipril for hypertension.")
    await say(api_on, group_id, "I take gliclazide.")
    assert await medicines(api_on, group_id) == {"ramipril": ("hypertension", True), "gliclazide": (None, True)}
