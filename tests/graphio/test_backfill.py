"""`mnemobus backfill`: a store drawn by an older extractor, drawn again by the current one, history kept."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from graph_support import cli_env, mnemobus, turns  # same folder (pytest prepend import mode)
from mnemobus.engine import MemoryEngine
from mnemobus.engine.embedders import make_embedder
from mnemobus.engine.extract_rules import RulesExtractor
from mnemobus.graphio.checkpoint import Checkpoint, default_path
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Fact
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
GROUP = GroupId("user_josh")
BEFORE = datetime(2025, 6, 1, tzinfo=UTC)  # a day long before any backfill runs


async def old_store(path: Path, *groups: GroupId) -> None:
    """Josh's five turns as the first regex rules drew them: no sister, no job title, no pet, no ending."""
    store = SqliteStore(path)
    await store.open()
    try:
        engine = MemoryEngine(store, extractor=RulesExtractor(), embedder=make_embedder("hash", "", None))
        for group in groups or (GROUP,):
            await engine.ingest_many(turns(group))
    finally:
        await store.close()


async def facts(path: Path, group: GroupId = GROUP) -> list[Fact]:
    store = SqliteStore(path)
    await store.open()
    try:
        return [f for f, _ in (await store.export_group(group)).facts]
    finally:
        await store.close()


def run(path: Path, *args: str) -> str:
    proc = mnemobus("backfill", *args, env=cli_env(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


async def test_backfill_adds_what_the_current_extractor_reads_in_stored_episodes(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    await old_store(db)
    assert "Josh works as a nurse" not in {f.fact for f in await facts(db)}
    out = run(db)
    assert "user_josh: 5 episode(s) re-extracted, 5 fact(s) added" in out
    now = {f.fact for f in await facts(db) if f.invalid_at is None}
    assert {"Anna is Josh's sister", "Josh works as a nurse", "Josh has a pet, Max", "Max is a dog"} <= now


async def test_backfill_ends_a_fact_no_episode_supports_with_cause_backfill_and_keeps_its_history(
        tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    await old_store(db)
    old_ids = {f.id for f in await facts(db)}
    started = datetime.now(UTC)
    run(db)
    after = {f.id: f for f in await facts(db)}
    ended = [f for f in after.values() if f.superseded_by == "backfill"]
    assert [f.fact for f in ended] == ["Anna lives in Paris"]  # the rules' Anna, a thing; now a person's fact
    assert ended[0].id in old_ids and ended[0].invalid_at is not None and ended[0].invalid_at >= started
    store = SqliteStore(db)
    await store.open()
    try:
        then = {f.id for f in await store.facts_valid_at(GROUP, BEFORE)}
    finally:
        await store.close()
    assert ended[0].id in then  # as of a day before the backfill, memory answers as it did


async def test_backfill_ends_a_job_the_current_extractor_reads_as_ended(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    await old_store(db)
    run(db)
    [acme] = [f for f in await facts(db) if f.fact == "Josh works at Acme"]
    assert (acme.invalid_at, acme.superseded_by) == (datetime(2025, 4, 1, tzinfo=UTC), None)


async def test_a_second_backfill_changes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    await old_store(db)
    run(db)
    first = await facts(db)
    assert "user_josh: 5 episode(s) re-extracted, 0 fact(s) added, 0 updated, 0 ended" in run(db)
    assert await facts(db) == first


async def test_backfill_since_re_extracts_only_the_episodes_said_from_then_on(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    await old_store(db)
    out = run(db, "--group", GROUP, "--since", "2025-03-15T00:00:00+00:00")
    assert "user_josh: 2 episode(s) re-extracted" in out  # "I no longer work at Acme", "I moved to Berlin"
    after = {f.fact: f for f in await facts(db)}
    assert "Josh works as a nurse" not in after  # said before --since: not read again
    assert after["Josh works at Acme"].invalid_at == datetime(2025, 4, 1, tzinfo=UTC)


async def test_a_backfill_resumes_after_the_groups_its_checkpoint_lists(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    done, todo = GroupId("user_done"), GroupId("user_todo")
    await old_store(db, done, todo)
    key = f"groups={done},{todo} since=-"
    Checkpoint(default_path(tmp_path, key, "backfill"), None).save({"done": [done]})  # as a killed run leaves it
    proc = mnemobus("backfill", "--group", done, "--group", todo, env=cli_env(db))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "resuming after 1 group(s) done" in proc.stderr
    assert [line.split(":")[0] for line in proc.stdout.splitlines()[:-1]] == [todo]
    assert "Josh works as a nurse" not in {f.fact for f in await facts(db, done)}
    assert not default_path(tmp_path, key, "backfill").exists()  # finished: the next run starts afresh
