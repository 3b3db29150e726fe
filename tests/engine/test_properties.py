"""Invariants as hypothesis properties: group isolation and exact as-of validity."""

from __future__ import annotations

import uuid
from datetime import timedelta

import anyio
from engine_support import T0, make_episode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embed import HashEmbedder
from mnemobus.store.model import RecallQuery
from mnemobus.store.sqlite import SqliteStore

CITIES = ["Berlin", "London", "Paris", "Tokyo", "Lima", "Oslo"]
TOOLS = ["vim", "neovim", "emacs", "helix"]
statement = st.one_of(
    st.builds(lambda c: f"I live in {c}.", st.sampled_from(CITIES)),
    st.builds(lambda t: f"I use {t}.", st.sampled_from(TOOLS)),
    st.builds(lambda a, b: f"I moved from {a} to {b}.", st.sampled_from(CITIES), st.sampled_from(CITIES)),
    st.builds(lambda a, b: f"I switched from {a} to {b}.", st.sampled_from(TOOLS), st.sampled_from(TOOLS)),
)
PROPS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _run(tmp_path_factory, body):  # type: ignore[no-untyped-def]
    async def main() -> None:
        store = SqliteStore(tmp_path_factory.mktemp("prop") / "m.sqlite3")
        await store.open()
        engine = MemoryEngine(store, embedder=HashEmbedder())
        try:
            await body(engine)
        finally:
            await engine.close()

    anyio.run(main, backend="asyncio")


@PROPS
@given(mine=st.lists(statement, min_size=1, max_size=8), theirs=st.lists(statement, min_size=1, max_size=8))
def test_recall_never_returns_another_groups_facts_or_messages(tmp_path_factory, mine, theirs) -> None:  # type: ignore[no-untyped-def]
    a, b = f"user_a{uuid.uuid4().hex[:8]}", f"user_b{uuid.uuid4().hex[:8]}"

    async def body(engine: MemoryEngine) -> None:
        for i, text in enumerate(mine):
            await engine.ingest(make_episode(a, text, days=i))
        for i, text in enumerate(theirs):
            await engine.ingest(make_episode(b, text, days=i))
        query = " ".join(CITIES + TOOLS) + " where do I live which editor"
        for as_of in (T0 + timedelta(days=d) for d in (0, 4, 30)):
            result = await engine.recall(RecallQuery(query, (a,), as_of=as_of, max_facts=50, max_episodes=50))
            assert {sf.fact.group_id for sf in result.facts} <= {a}
            assert {se.episode.group_id for se in result.episodes} <= {a}
        assert all(f.group_id == a for f in await engine.facts_as_of(a, T0 + timedelta(days=30)))

    _run(tmp_path_factory, body)


def _expected(observations: list[tuple[int, str, str, str | None]], t: int) -> set[tuple[str, str]]:
    """The model, as validity intervals built from chronological statements.

    lives_in is exclusive (a new city ends the old one); uses is not, but a
    switch ends the tool switched from. "moved/switched from A" with A never
    mentioned and nothing it could end means A held from the unknown past.
    """
    intervals: list[list] = []  # [relation, object, start or None (unknown past), end or None]

    def open_(rel: str, obj: str | None = None) -> list[list]:
        return [iv for iv in intervals if iv[0] == rel and iv[3] is None and (obj is None or iv[1] == obj)]

    for day, relation, obj, replaced in observations:
        if open_(relation, obj):
            continue  # re-observed: reinforced, nothing else changes
        mentioned = any(iv[0] == relation and iv[1] == replaced for iv in intervals)
        if relation == "lives_in":
            ended = open_(relation)
        else:
            ended = open_(relation, replaced) if replaced is not None and replaced != obj else []
        for iv in ended:
            iv[3] = day
        if replaced is not None and replaced != obj and not ended and not mentioned:
            intervals.append([relation, replaced, None, day])
        intervals.append([relation, obj, day, None])
    return {(r, o) for r, o, start, end in intervals if (start is None or start <= t) and (end is None or t < end)}


@PROPS
@given(steps=st.lists(st.tuples(st.integers(1, 3), statement), min_size=1, max_size=10), probe=st.integers(0, 40))
def test_as_of_snapshot_holds_exactly_the_facts_valid_then(tmp_path_factory, steps, probe) -> None:  # type: ignore[no-untyped-def]
    group = f"user_{uuid.uuid4().hex[:8]}"
    observations: list[tuple[int, str, str, str | None]] = []
    day = 0
    timeline: list[tuple[int, str]] = []
    for gap, text in steps:
        day += gap
        timeline.append((day, text))
        words = text.rstrip(".").split()
        if text.startswith("I live in"):
            observations.append((day, "lives_in", words[-1], None))
        elif text.startswith("I use"):
            observations.append((day, "uses", words[-1], None))
        elif text.startswith("I moved"):
            observations.append((day, "lives_in", words[-1], words[3]))
        else:
            observations.append((day, "uses", words[-1], words[3]))

    async def body(engine: MemoryEngine) -> None:
        for d, text in timeline:
            await engine.ingest(make_episode(group, text, days=d))
        snapshot = await engine.facts_as_of(group, T0 + timedelta(days=probe))
        got = {(f.relation, f.object_name) for f in snapshot}
        assert got == _expected(observations, probe)

    _run(tmp_path_factory, body)
