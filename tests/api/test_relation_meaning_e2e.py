"""The semantic fallback through the public door: a verb no table row names, said in POST /messages, is stored by
the worker under the relation it means; with the fallback off (`extraction.relation_threshold: null`) it keeps the
verb."""

from __future__ import annotations

import pytest

from mnemobus.shared.config import Settings
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    """The test's settings with the threshold its `indirect` parameter gives (default: the configured one)."""
    threshold = getattr(request, "param", settings.extraction.relation_threshold)
    return settings.model_copy(update={"extraction": settings.extraction.model_copy(
        update={"relation_threshold": threshold})})


async def relations(api: Api, group: str) -> set[tuple[str, str]]:
    export = await api.store.export_group(group)
    return {(f.relation, f.object_name) for f, _ in export.facts if f.invalid_at is None}


async def test_a_verb_the_table_lacks_is_stored_as_the_relation_it_means(api: Api) -> None:
    await api.say("mara", "I relish spicy food.")
    assert ("likes", "spicy food") in await relations(api, "mara")


@pytest.mark.parametrize("settings", [None], indirect=True)
async def test_with_the_fallback_off_the_verb_is_kept(api: Api) -> None:
    await api.say("mara", "I relish spicy food.")
    assert ("relishes", "spicy food") in await relations(api, "mara")
