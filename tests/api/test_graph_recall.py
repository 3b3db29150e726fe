"""Graph recall through the public doors: a question that shares no word with the turn that answers it, but
names what that turn talks about, finds the turn with `memory.recall.graph` on and not with it off.

Sofia's puppy is called Biscuit (said in one turn); days later a turn says only "Biscuit chewed up my sneakers
again!". Asked "What trouble does Sofia's puppy cause?", full-text finds the first turn; only the graph reaches
the second: Sofia -> (a fact) -> Biscuit -> (a mention) -> the turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from mnemobus.shared.config import RecallTuning, Settings
from tests.api.conftest import Api, wait_for
from tests.pipeline.conftest import ask, request, running, wait_for_episodes

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)
TURNS = (  # (uuid, what was said); a day apart, so no turn is another's neighbour in time
    ("m0", "My sister Sofia adopted a puppy called Biscuit."),
    ("m1", "That is lovely news, congratulations to her!"),
    ("m2", "I finished the pottery class on Tuesday."),
    ("m3", "Biscuit chewed up my sneakers again!"),
    ("m4", "I painted a sunset over the lake yesterday."),
)
QUESTION = "What trouble does Sofia's puppy cause?"


def with_graph(settings: Settings, mode: str) -> Settings:
    return settings.model_copy(update={"memory": settings.memory.model_copy(
        update={"recall": RecallTuning(graph=mode)})})


@pytest.fixture(params=["off", "bfs", "activation", "ppr"])
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    """The test's settings with one graph mode (the `api` fixture runs on them)."""
    return with_graph(settings, request.param)


async def found_by_search(api: Api, group: str) -> list[str]:
    """The message uuids of what POST /search returns for the question."""
    for i, (uuid, text) in enumerate(TURNS):
        r = await api.http.post("/messages", headers=api.auth, json={"group_id": group, "messages": [
            {"uuid": uuid, "role_type": "user", "role": "Caroline", "content": text,
             "timestamp": (T0 + timedelta(days=i)).isoformat()}]})
        assert r.status_code == 202, r.text
    assert await wait_for(lambda: api.store.count_episodes(group), len(TURNS)) == len(TURNS)
    r = await api.http.post("/search", headers=api.auth, json={"group_ids": [group], "query": QUESTION,
                                                                "max_facts": 10})
    assert r.status_code == 200, r.text
    return [mid for f in r.json()["facts"] for mid in f["source_message_ids"]]


async def test_post_search_reaches_a_turn_only_through_the_entity_it_mentions(
        api: Api, group_id: str, settings: Settings) -> None:
    found = await found_by_search(api, group_id)
    assert "m0" in found  # full-text finds the turn that names Sofia and the puppy in every mode
    assert ("m3" in found) == (settings.memory.recall.graph != "off")


@pytest.fixture
async def pipeline_graph(settings: Settings) -> AsyncIterator[object]:
    async with running(settings) as rt:
        yield rt


async def test_the_plugin_enriches_a_request_with_a_turn_reached_through_the_graph(
        pipeline_graph: object, settings: Settings) -> None:
    rt = pipeline_graph
    for n, (_, text) in enumerate(TURNS, start=1):
        await ask(rt, request(text))
        assert await wait_for_episodes(rt, "user_josh", n) == n
    reply = await ask(rt, request(QUESTION))
    assert reply["memory"]["status"] == "enriched"
    assert "Sofia" in reply["memory"]["block"]
    assert ("sneakers" in reply["memory"]["block"]) == (settings.memory.recall.graph != "off")


def test_an_unknown_graph_mode_is_refused_naming_the_key() -> None:
    with pytest.raises(ValidationError, match=r"memory\.recall\.graph"):
        Settings(memory={"recall": {"graph": "pagerank"}})


def test_a_graph_parameter_out_of_range_is_refused_naming_the_key() -> None:
    with pytest.raises(ValidationError, match=r"memory\.recall\.graph_decay"):
        Settings(memory={"recall": {"graph_decay": 1.5}})


def test_the_graph_mode_can_be_set_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MNEMOBUS_MEMORY__RECALL__GRAPH", "ppr")
    assert Settings().memory.recall.graph == "ppr"
