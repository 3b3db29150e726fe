"""POST /search over two groups that hold the same words, as a user's group and an agent's group do.

Inside one recall the groups share the full-text rankings by the words alone and the base rows those name
(issue 36, docs/performance.md): each group still keeps only its own rows. Through the public door: every
message returned is the one its own group stored, and a search of one group never returns the other's. (The
later reads by id are per group too, so a leaked id would find no row here; the store-level test,
test_groups_sharing_a_ranking_each_get_only_their_own_rows, sees the text search's own hits.)
"""

from __future__ import annotations

import pytest

from tests.api.conftest import Api

pytestmark = pytest.mark.anyio


async def test_a_search_of_two_groups_saying_the_same_words_returns_each_groups_own_messages(
        api: Api, unique: str) -> None:
    user, agent = f"user-{unique}", f"agent-{unique}"
    [said_by_user] = await api.say(user, "Josh climbs with Anna every Sunday at the old quarry.")
    [said_to_agent] = await api.say(agent, "Anna climbs with Josh every Sunday at the new gym.")
    both = (await api.http.post("/search", json={"group_ids": [user, agent], "query": "who climbs with Anna on Sunday?",
                                                 "max_facts": 10}, headers=api.auth)).json()["facts"]
    messages = {f["uuid"]: f["fact"] for f in both if f["kind"] == "episode"}
    assert set(messages) == {said_by_user, said_to_agent}
    assert "old quarry" in messages[said_by_user] and "new gym" in messages[said_to_agent]
    for group, own, theirs in ((user, said_by_user, said_to_agent), (agent, said_to_agent, said_by_user)):
        alone = (await api.http.post("/search", json={"group_ids": [group], "query": "who climbs with Anna on Sunday?",
                                                      "max_facts": 10}, headers=api.auth)).json()["facts"]
        shown = {f["uuid"] for f in alone if f["kind"] == "episode"}
        assert own in shown and theirs not in shown
