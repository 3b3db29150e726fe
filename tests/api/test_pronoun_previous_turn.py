""""She" and "he" in a message resolved to the person last named within the few turns before it in the same
conversation, end to end through POST /messages (issue 35): each message is its own batch, so only the stored turns
before it can say who is meant, and they must say what one batch holding every turn would (sentences of this file's
own)."""

from __future__ import annotations

import pytest

from tests.api.both_stores import api_on, say  # noqa: F401 - the fixture, on SQLite and on Neo4j
from tests.api.conftest import Api
from tests.store.conftest import neo4j_uri  # noqa: F401 - the session's Neo4j, for the neo4j half

pytestmark = pytest.mark.anyio


async def held(api: Api, group: str) -> set[tuple[str, str, str]]:
    """(subject, relation, object) of every fact the group holds now."""
    export = await api.store.export_group(group)
    return {(f.subject_name, f.relation, f.object_name) for f, _ in export.facts if f.invalid_at is None}


async def test_she_in_a_turn_of_its_own_is_the_person_the_turn_before_named(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "My brother's wife Dorota lives in Bristol.")
    await say(api_on, group_id, "She moved to Cardiff in May.")
    facts = await held(api_on, group_id)
    assert ("Dorota", "lives_in", "Cardiff") in facts
    assert ("Dorota", "lives_in", "Bristol") not in facts


async def test_he_is_the_relative_named_by_apposition_in_the_turn_before(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "Bogdan, my uncle, came round for dinner.")
    await say(api_on, group_id, "He works at Ferrari now.")
    assert ("Bogdan", "works_at", "Ferrari") in await held(api_on, group_id)


async def test_she_two_turns_after_the_person_was_named_is_that_person_as_in_one_batch(api_on: Api,
                                                                                      group_id: str) -> None:
    await say(api_on, group_id, "My cousin Marta lives in Porto.")
    await say(api_on, group_id, "I had soup for lunch today.")
    await say(api_on, group_id, "She works as a pharmacist.")
    assert ("Marta", "works_as", "pharmacist") in await held(api_on, group_id)


async def test_a_pronoun_with_nobody_named_before_states_nothing_about_anyone(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "The weather was awful today.")
    await say(api_on, group_id, "She moved to Cardiff in May.")
    assert not any(r == "lives_in" for _, r, _ in await held(api_on, group_id))


async def test_another_conversations_turn_is_not_the_previous_turn(api_on: Api, group_id: str) -> None:
    await say(api_on, group_id, "My uncle Bogdan came round for dinner.")
    await say(api_on, f"{group_id}-other", "He works at Ferrari now.")
    assert not any(r == "works_at" for _, r, _ in await held(api_on, f"{group_id}-other"))
