"""`mnemobus import messages`: every good line stored once through the worker's ingestion, bad lines named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graph_support import ROOT, cli_env, mnemobus  # same folder (pytest prepend import mode)
from mnemobus.graphio.messages import example_line
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import episode_id_for
from mnemobus.store.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
GROUP = GroupId("user_josh")
T0 = datetime(2025, 1, 1, tzinfo=UTC)
SAYINGS = ("My sister Anna lives in Paris.", "I work at Acme as a nurse.", "I have a dog called Max.",
           "We watched a film last night.")


def write_log(path: Path, n: int, *, bad: dict[int, str] | None = None) -> list[str]:
    """n good messages (ids m0..), with `bad[i]` written as its own line after message i; the good ids."""
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(example_line(GROUP, f"{SAYINGS[i % len(SAYINGS)]} ({i})", f"m{i}", T0 + timedelta(minutes=i)))
            if bad and i in bad:
                f.write(bad[i] + "\n")
    return [f"m{i}" for i in range(n)]


async def stored_ids(path: Path) -> list[str]:
    store = SqliteStore(path)
    await store.open()
    try:
        episodes = await store.episodes(GROUP, last_n=100_000)
    finally:
        await store.close()
    return sorted(e.source_message_id for e in episodes)


def closing(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


async def test_import_stores_every_message_and_reports_a_bad_line_by_number(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    ids = write_log(log, 6, bad={1: '{"group": "user_josh", "txt": "typo"}', 3: "not json"})
    proc = mnemobus("import", "messages", str(log), env=cli_env(tmp_path / "m.sqlite3"))
    assert closing(proc) == ("import messages log.jsonl: read 8, stored 6, skipped 0 (already stored), "
                             "dead-lettered 2 (malformed_json 1, schema_error 1)")
    assert "line 3: schema_error:" in proc.stderr and "txt: Extra inputs are not permitted" in proc.stderr
    assert "line 6: malformed_json:" in proc.stderr
    assert await stored_ids(tmp_path / "m.sqlite3") == sorted(ids)
    dead = [json.loads(x) for x in (tmp_path / "imports").glob("*.dead.jsonl").__next__().read_text().splitlines()]
    assert [(d["line"], d["reason"]) for d in dead] == [(3, "schema_error"), (6, "malformed_json")]


async def test_imported_messages_are_extracted_like_live_episodes(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    write_log(log, 4)
    closing(mnemobus("import", "messages", str(log), env=cli_env(tmp_path / "m.sqlite3")))
    store = SqliteStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        facts = await store.facts_valid_at(GROUP, T0 + timedelta(days=1))
        first = await store.get_episode(GROUP, episode_id_for(GROUP, "m0", "user"))
    finally:
        await store.close()
    assert {"Anna lives in Paris", "Josh works at Acme", "Josh has a pet, Max"} <= {f.fact for f in facts}
    assert first is not None and (first.speaker, first.platform, first.reference_time) == ("Josh", "import", T0)


async def test_a_second_run_of_the_same_file_stores_nothing_twice(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    ids = write_log(log, 5)
    env = cli_env(tmp_path / "m.sqlite3")
    closing(mnemobus("import", "messages", str(log), env=env))
    again = closing(mnemobus("import", "messages", str(log), env=env))
    assert again == "import messages log.jsonl: read 5, stored 0, skipped 5 (already stored), dead-lettered 0"
    assert await stored_ids(tmp_path / "m.sqlite3") == sorted(ids)


async def test_an_import_killed_half_way_resumes_and_stores_every_message_exactly_once(tmp_path: Path) -> None:
    log, db = tmp_path / "log.jsonl", tmp_path / "m.sqlite3"
    # 1,500 lines (was 3,000): killed once its checkpoint passes line 500, it dies part-way (asserted below) and the
    # resumed run still reads the rest in many batches; what is proven (resume from the checkpoint, the batch in
    # flight found stored, none twice) does not depend on the length of the tail
    ids = write_log(log, 1500)
    checkpoint = tmp_path / "ck.json"
    args = [sys.executable, "-m", "mnemobus.cli", "import", "messages", str(log), "--batch", "50",
            "--checkpoint", str(checkpoint)]
    first = subprocess.Popen(args, cwd=ROOT, env=cli_env(db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (checkpoint.exists() and json.loads(checkpoint.read_text())["line"] >= 500):
            assert first.poll() is None and time.monotonic() < deadline, "the import ended or stalled before 500 lines"
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait()
    assert first.returncode == -signal.SIGKILL
    partial = await stored_ids(db)
    assert 500 <= len(partial) < len(ids)
    proc = subprocess.run(args, cwd=ROOT, env=cli_env(db), capture_output=True, text=True, timeout=300)
    assert "resuming at line" in proc.stderr
    read, stored, skipped = (int(w) for w in _numbers(closing(proc)))
    assert (read, stored + skipped) == (1500, 1500) and skipped <= 50  # at most the batch in flight, found stored
    assert await stored_ids(db) == sorted(ids)  # every message, none twice (ids in a list, duplicates would show)


def _numbers(line: str) -> list[str]:
    """read, stored, skipped from a closing count."""
    words = line.replace(",", "").split()
    return [words[words.index(w) + 1] for w in ("read", "stored", "skipped")]
