"""A medicine told for a condition comes back in the context block with its condition, end to end through the bus
on both stores (issue 35): a skill request through the plugin, the exchange through the worker into the store,
the next request enriched with it; a switch leaves only the new medicine held for that condition."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mnemobus.kernel.app import Runtime
from mnemobus.shared.config import Settings
from tests.pipeline.conftest import ask, request, running, wait_for_episodes
from tests.store.conftest import neo4j_uri  # noqa: F401 - the session's Neo4j, for the neo4j half

pytestmark = pytest.mark.anyio
DISCORD_ID = "4242"


@pytest.fixture
def person() -> str:
    """A user of this test alone: on the run's shared Neo4j no other test writes its group."""
    return f"pat{uuid.uuid4().hex[:10]}"


@pytest.fixture
def users_file(tmp_path: Path, person: str) -> Path:
    path = tmp_path / "users.yaml"
    path.write_text(f"users:\n  - id: {person}\n    identities:\n      discord: '{DISCORD_ID}'\n")
    return path


@pytest.fixture(params=["sqlite", "neo4j"])
async def pipeline_on(request: pytest.FixtureRequest, settings: Settings, person: str) -> AsyncIterator[Runtime]:
    if request.param == "neo4j":
        store = {"backend": "neo4j", "neo4j": {"uri": request.getfixturevalue("neo4j_uri")}}
        # a first recall on Neo4j loads the group's mirror: seconds on a loaded machine, past the test settings'
        # 500 ms deadline (the block would then say "timeout", which is the fail-open path, not this test's)
        memory = {**settings.memory.model_dump(), "recall_deadline_ms": 8_000}
        settings = Settings.model_validate({**settings.model_dump(), "store": store, "memory": memory})
    async with running(settings) as rt:
        yield rt
        for group in await rt.engine.store.group_ids():
            if person in group:
                await rt.engine.store.delete_group(group)


async def tell(rt: Runtime, person: str, content: str, n: int) -> dict:
    """One exchange through the plugin; returns its reply once the worker has stored it (the n-th of the user)."""
    reply = await ask(rt, request(content, user=DISCORD_ID), timeout=60)
    assert await wait_for_episodes(rt, f"user_{person}", n, timeout=120) == n
    return reply


async def test_the_context_block_names_the_condition_a_medicine_is_for(pipeline_on: Runtime, person: str) -> None:
    await tell(pipeline_on, person, "I'm on ramipril for hypertension.", 1)
    reply = await tell(pipeline_on, person, "Which tablets are mine for hypertension?", 2)
    assert reply["memory"]["status"] == "enriched"
    assert "takes ramipril for hypertension" in reply["memory"]["block"]


async def test_after_a_switch_only_the_new_medicine_is_held_for_the_condition(pipeline_on: Runtime,
                                                                              person: str) -> None:
    await tell(pipeline_on, person, "I'm on ramipril for hypertension.", 1)
    await tell(pipeline_on, person, "Besides that I take gliclazide for diabetes.", 2)
    await tell(pipeline_on, person, "They switched me from ramipril to candesartan.", 3)
    stored = (await pipeline_on.engine.store.export_group(f"user_{person}")).facts
    held = {(f.object_name, f.qualifier) for f, _ in stored if f.relation == "takes_medication" and f.invalid_at is None}
    assert held == {("candesartan", "hypertension"), ("gliclazide", "diabetes")}
