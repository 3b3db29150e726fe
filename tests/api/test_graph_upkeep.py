"""Community upkeep end to end through the bus, on both stores (issue 39): episodes in over /messages, the worker
refreshes every N of a group's episodes and places a new entity by its neighbours' vote; `memory.api.graph.*`
and `mnemobus graph stats|refresh` show and drive it."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from mnemobus.shared import subjects
from mnemobus.api.service import EXTRA_URL, run_api
from mnemobus.kernel.app import open_runtime, serve
from mnemobus.cli import graph as graph_cli
from mnemobus.shared.config import ApiSettings, Settings

from tests.api.conftest import Api
from tests.store.conftest import neo4j_uri  # noqa: F401 - the session's Neo4j, for the neo4j half

pytestmark = pytest.mark.anyio
# a fixed name, used only by this file (one worker) on the run's Neo4j; the communities found no longer depend on
# it (propagation orders nodes by name, not by id: tests/engine/test_communities.py)
GROUP = "user_upkeep"
EVERY = 6


@pytest.fixture
def every() -> int:
    """The worker's refresh every N episodes of a group (0: only when asked, over the bus)."""
    return EVERY


@pytest.fixture(params=["sqlite", "neo4j"])
async def upkeep_api(request: pytest.FixtureRequest, settings: Settings, every: int) -> AsyncIterator[Api]:
    """The worker and the API on one store, a refresh every `every` episodes of a group."""
    store: dict[str, Any] = settings.store.model_dump()
    if request.param == "neo4j":
        store = {"backend": "neo4j", "neo4j": {"uri": request.getfixturevalue("neo4j_uri")}}
    s = Settings.model_validate({**settings.model_dump(), "store": store,
                                 "communities": {"refresh_every_episodes": every, "time_budget_s": 30}})
    async with open_runtime(s) as rt:
        await rt.engine.store.delete_group(GROUP)  # an earlier test of this file left it on the run's Neo4j
        async with anyio.create_task_group() as tg:
            await tg.start(lambda task_status: serve(rt, {"worker"}, task_status=task_status))
            api_config = ApiSettings(port=0, drain_timeout_s=2)
            await tg.start(functools.partial(run_api, rt, api=api_config))
            async with httpx.AsyncClient(base_url=rt.extra[EXTRA_URL], timeout=10) as client:
                yield Api(rt, client)
            await rt.engine.store.delete_group(GROUP)
            rt.stop.set()


async def ask(api: Api, endpoint: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """One request with a timeout for a shared, loaded machine (a Neo4j write retried after a deadlock)."""
    msg = await api.rt.bus.request(subjects.api(endpoint), json.dumps(body).encode(), 30)
    return json.loads(msg.data) if msg.data else {}, dict(msg.headers or {})


async def stats(api: Api) -> dict[str, Any]:
    body, headers = await ask(api, "graph.stats", {"group_id": GROUP})
    assert "Nats-Service-Error" not in headers, headers
    return body["groups"][0]


async def until(api: Api, key: str, value: int, timeout: float = 60) -> dict[str, Any]:
    """The group's stats once `key` reaches `value` (the worker's upkeep runs beside ingestion)."""
    with anyio.fail_after(timeout):
        while (got := await stats(api))[key] < value:
            await anyio.sleep(0.05)
    return got


async def refresh(api: Api) -> dict[str, Any]:
    body, headers = await ask(api, "graph.refresh", {"group_id": GROUP})
    assert "Nats-Service-Error" not in headers, headers
    return body["refreshes"][0]


async def two_clusters(api: Api) -> dict[str, Any]:
    # two stars: a path (Alice - Acme - Bob - Berlin, as this once said) may split in two under label propagation,
    # and whether it did depended on the group's name until nodes were ordered by name
    await api.say(GROUP, "Alice works at Acme.", "Bob works at Acme.", "Grace works at Acme.",
                  "Carol lives in Paris.", "Dave lives in Paris.", "Frank lives in Paris.")
    return await until(api, "communities", 2)


async def test_the_worker_refreshes_a_groups_communities_after_n_of_its_episodes(upkeep_api: Api) -> None:
    got = await two_clusters(upkeep_api)
    assert (got["communities"], got["largest_community"], got["active_facts"]) == (2, 4, 6)
    assert got["last_refresh"] is not None


# No refresh but the one asked for: Erin can join only by the vote. With a refresh every 6 episodes, Erin once
# ended in Acme's community with no vote counted (a full CI run on the shared Neo4j; not reproduced in 20 runs
# under load): a refresh that read Erin's fact had placed her first, and the test could not tell which did.
@pytest.mark.parametrize("every", [0])
async def test_a_new_entity_joins_its_neighbours_community_by_vote(upkeep_api: Api) -> None:
    await upkeep_api.say(GROUP, "Alice works at Acme.", "Bob works at Acme.", "Grace works at Acme.",
                         "Carol lives in Paris.", "Dave lives in Paris.", "Frank lives in Paris.")
    while not (done := await refresh(upkeep_api))["finished"]:  # a slice out of time resumes where it stopped
        pass
    assert done["communities"] == 2
    await upkeep_api.say(GROUP, "Erin works at Acme.")
    got = await until(upkeep_api, "largest_community", 5)
    assert got["communities"] == 2
    found, _ = await upkeep_api.nats("entities", {"group_id": GROUP, "query": "Erin"})
    erin = next(e["uuid"] for e in found["entities"] if e["name"] == "Erin")
    acme = next(e["uuid"] for e in (await upkeep_api.nats("entities", {"group_id": GROUP, "query": "Acme"}))[0]["entities"]
                if e["name"] == "Acme")
    placed = await upkeep_api.store.community_of(GROUP, [erin, acme])
    assert placed[erin] == placed[acme]
    votes = {o: upkeep_api.rt.metrics.communities.votes.labels(outcome=o)._value.get() for o in ("joined", "none", "failed")}
    assert votes["joined"] == 1, (votes, upkeep_api.rt.worker.communities.outcomes)  # Erin, and no one else


async def test_a_second_refresh_of_an_unchanged_graph_does_no_summary_work(upkeep_api: Api) -> None:
    await two_clusters(upkeep_api)
    await refresh(upkeep_api)
    again = await refresh(upkeep_api)
    assert (again["finished"], again["communities"], again["changed"], again["unchanged"], again["summaries"]) == (
        True, 2, 0, 2, 0)


async def test_graph_stats_and_refresh_from_the_command_line(upkeep_api: Api,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    await two_clusters(upkeep_api)
    settings = upkeep_api.rt.settings  # the operator's: the service's bus
    parser = graph_cli.standalone_parser()
    args = parser.parse_args(["graph", "stats", "--group", GROUP])
    assert await anyio.to_thread.run_sync(args.handler, settings, args) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["group_id", "entities", "active_facts", "ended_facts", "communities",
                              "largest_community", "last_refresh", "evicted"]
    assert row.split()[:6] == [GROUP, "8", "6", "0", "2", "4"] and row.split()[-1] == "0"
    args = parser.parse_args(["graph", "refresh", "--group", GROUP, "--json"])
    assert await anyio.to_thread.run_sync(args.handler, settings, args) == 0
    assert '"summaries": 0' in capsys.readouterr().out


async def test_graph_stats_over_http_match_the_bus(upkeep_api: Api) -> None:
    on_bus = await two_clusters(upkeep_api)
    r = await upkeep_api.http.get(f"/graph/{GROUP}/stats")
    assert r.status_code == 200 and r.json()["groups"] == [on_bus]


async def test_stats_of_a_malformed_group_id_are_refused_naming_the_field(upkeep_api: Api) -> None:
    body, headers = await upkeep_api.nats("graph.stats", {"group_id": "no spaces allowed"})
    assert headers.get("Nats-Service-Error-Code") == "422" and "group_id" in headers["Nats-Service-Error"]
