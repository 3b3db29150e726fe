"""takes_medication is one value per condition, end to end on both stores (issue 35): messages in over POST
/messages, through the bus to the worker, facts out of POST /search. A medicine said for a condition replaces only
the one held for that condition; a switch with no condition named is for the condition of the medicine it
replaces; one said for another condition ends nothing (sentences of this file's own)."""

from __future__ import annotations

import pytest

from tests.api.both_stores import api_on, say  # noqa: F401 - the fixture, on SQLite and on Neo4j
from tests.api.conftest import Api
from tests.store.conftest import neo4j_uri  # noqa: F401 - the session's Neo4j, for the neo4j half

pytestmark = pytest.mark.anyio


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
