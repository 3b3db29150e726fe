"""Fragments with the "I'm" dropped, through the public door: "No longer vegan." ends the diet the store holds,
"Still at <firm>." states the job, as the full sentences do (sentences of this file's own)."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def facts(api: Api, group: str) -> dict[tuple[str, str], bool]:
    """(relation, object) -> still held."""
    export = await api.store.export_group(group)
    return {(f.relation, f.object_name): f.invalid_at is None for f, _ in export.facts}


async def test_a_fragment_that_denies_a_state_ends_it(api: Api) -> None:
    await api.say("mara", "I'm vegan.")
    await api.say("mara", "Not vegan any more, by the way.")
    assert (await facts(api, "mara"))[("diet", "vegan")] is False


async def test_a_fragment_with_no_longer_ends_the_job(api: Api) -> None:
    await api.say("mara", "I work at Deloitte.")
    await api.say("mara", "No longer at Deloitte.")
    assert (await facts(api, "mara"))[("works_at", "Deloitte")] is False


async def test_a_fragment_with_still_states_the_job(api: Api) -> None:
    await api.say("mara", "Still at Deloitte.")
    assert (await facts(api, "mara")).get(("works_at", "Deloitte")) is True


async def test_a_question_fragment_states_nothing(api: Api) -> None:
    await api.say("mara", "Still at Deloitte?")
    assert await facts(api, "mara") == {}
