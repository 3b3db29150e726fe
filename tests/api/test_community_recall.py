"""Community summaries as a recall signal through the public doors (`memory.recall.communities`, issue 39).

Three players form one community by the jazz they play together; one fact between two of them ("Brindle owes
Tamsk twelve coins") shares no word with the question "Who plays jazz music?", is too far from it for vector
search, and the graph walk starts from the places whose names the question matches, which are tied only to
each other. With communities on, the community's summary (its central
members and facts) matches the question and its members' facts join the ranking, so that fact comes back through
POST /search; with communities off, nothing reaches it.
"""

from __future__ import annotations

import json

import anyio
import pytest
from pydantic import ValidationError

from mnemobus.api.service import run_api
from mnemobus.shared import subjects
from mnemobus.shared.config import ApiSettings, RecallTuning, Settings
from tests.api.conftest import Api
from tests.pipeline.conftest import ask, request, running
from tests.store.test_conformance import entity, fact

pytestmark = pytest.mark.anyio

QUESTION = "Who plays jazz music?"
OWES = "Brindle owes Tamsk twelve coins"


@pytest.fixture(params=["off", "on"])
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    return settings.model_copy(update={"memory": settings.memory.model_copy(
        update={"recall": RecallTuning(communities=request.param)})})


async def jazz_trio(rt: object, group: str) -> None:
    """The trio's facts, and places whose names the question does match (the graph walk starts from them, and
    they are tied only to each other), written as ingestion writes them, with the service's own embedder."""
    qorvath, brindle, tamsk = (entity(group, n) for n in ("Qorvath", "Brindle", "Tamsk"))
    places = [entity(group, n, kind="place") for n in ("Jazz Club", "Music Hall", "Jazz Cafe", "Music School",
                                                        "Jazz Records", "Music Shop")]
    facts = [fact(group, qorvath, "plays_jazz_with", brindle, "Qorvath plays jazz music with Brindle"),
             fact(group, brindle, "plays_jazz_with", tamsk, "Brindle plays jazz music with Tamsk"),
             fact(group, tamsk, "plays_jazz_with", qorvath, "Tamsk plays jazz music with Qorvath"),
             fact(group, brindle, "owes", tamsk, OWES),
             *(fact(group, a, "is_near", b, f"{a.name} is near {b.name}") for a, b in zip(places, places[1:]))]
    entities = [qorvath, brindle, tamsk, *places]
    embed = rt.engine.embedder.embed  # type: ignore[attr-defined]
    async with rt.engine.store.transaction() as tx:  # type: ignore[attr-defined]
        for e, v in zip(entities, embed([e.name for e in entities]), strict=True):
            await tx.insert_entity(e, v)
        for f, v in zip(facts, embed([f.fact for f in facts]), strict=True):
            await tx.insert_fact(f, v)


async def refreshed(rt: object, group: str) -> None:
    """The group's communities refreshed now, on the bus (`memory.api.graph.refresh`)."""
    msg = await rt.bus.request(subjects.api("graph.refresh"), json.dumps({"group_id": group}).encode(), 30)  # type: ignore[attr-defined]
    assert json.loads(msg.data)["refreshes"][0]["communities"] >= 2, msg.data


async def searched(api: Api, group: str) -> list[str]:
    await jazz_trio(api.rt, group)
    await refreshed(api.rt, group)
    r = await api.http.post("/search", headers=api.auth, json={"group_ids": [group], "query": QUESTION,
                                                                "max_facts": 10})
    assert r.status_code == 200, r.text
    return [f["fact"] for f in r.json()["facts"]]


async def test_post_search_reaches_a_fact_only_through_the_community_whose_summary_matches(
        api: Api, group_id: str, settings: Settings) -> None:
    found = await searched(api, group_id)
    assert "Qorvath plays jazz music with Brindle" in found  # full-text, in both settings
    assert (OWES in found) == (settings.memory.recall.communities == "on")


@pytest.mark.parametrize("settings", ["on"], indirect=True)
async def test_the_plugin_puts_a_fact_reached_through_a_matched_community_in_the_context_block(
        settings: Settings) -> None:
    async with running(settings) as rt:
        async with anyio.create_task_group() as tg:  # the memory API serves graph.refresh
            await tg.start(lambda task_status: run_api(rt, api=ApiSettings(port=0), task_status=task_status))
            await jazz_trio(rt, "user_josh")
            await refreshed(rt, "user_josh")
            reply = await ask(rt, request(QUESTION))
            tg.cancel_scope.cancel()
    assert reply["memory"]["status"] == "enriched"
    assert OWES in reply["memory"]["block"]


def test_an_unknown_communities_setting_is_refused_naming_the_key() -> None:
    with pytest.raises(ValidationError, match="communities"):
        RecallTuning(communities="sometimes")  # type: ignore[arg-type]
