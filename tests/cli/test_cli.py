"""The command line as a newcomer uses it: real processes, real exit codes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "MNEMOBUS_NATS__DATA_DIR": str(tmp_path / "nats"),
        "MNEMOBUS_STORE__SQLITE_PATH": str(tmp_path / "m.sqlite3"),
        "MNEMOBUS_METRICS__PORT": "0",
        "MNEMOBUS_API__PORT": "0",
        "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash",
    })
    env.update(extra)
    return env


def _mnemobus(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mnemobus.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_subcommand_and_an_example():
    out = _mnemobus("--help", env=dict(os.environ)).stdout
    for word in ("run", "doctor", "dlq", "examples:", "MNEMOBUS_"):
        assert word in out


@pytest.fixture(scope="module")
def demo_once(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One `mnemobus run --once` for the tests that read what it printed: the same command in a fresh folder gave
    them the same output, at the cost of a whole process (nats-server, store, demo) each."""
    return _mnemobus("run", "--once", env=_env(tmp_path_factory.mktemp("demo-once")))


def test_run_once_plays_the_demo_and_exits_zero(demo_once):
    proc = demo_once
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "[demo] turn 3" in proc.stdout
    assert "stored episode" in proc.stdout
    assert "group user_josh now holds 3 episode(s)" in proc.stdout


def test_run_once_recalls_a_fact_from_turn_one_in_a_later_turn(demo_once):
    proc = demo_once
    later = proc.stdout.split("[demo] turn 2", 1)[1]
    assert "[User context — user_josh]" in later and "London" in later


def test_a_served_process_runs_on_uvloop_by_default(demo_once):
    assert "event loop: uvloop" in demo_once.stdout


def test_run_once_on_asyncios_own_loop_still_recalls_a_later_turn(tmp_path):
    proc = _mnemobus("run", "--once", env=_env(tmp_path, MNEMOBUS_EVENT_LOOP="asyncio"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "event loop: asyncio" in proc.stdout
    assert "London" in proc.stdout.split("[demo] turn 2", 1)[1]


def test_an_unknown_event_loop_is_refused_at_start_naming_the_field(tmp_path):
    proc = _mnemobus("run", "--once", env=_env(tmp_path, MNEMOBUS_EVENT_LOOP="tokio"))
    assert proc.returncode == 2
    assert "MNEMOBUS_EVENT_LOOP" in proc.stderr and "event_loop" in proc.stderr


def test_a_started_process_freezes_what_it_loaded_for_its_life(tmp_path):
    proc = _mnemobus("run", "--once", env=_env(tmp_path, MNEMOBUS_LOG_LEVEL="DEBUG"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "started: " in proc.stderr and "long-lived objects taken out of the collector's sight" in proc.stderr


def test_invalid_config_is_refused_at_start_with_exit_code_2(tmp_path):
    proc = _mnemobus("run", "--once", env=_env(tmp_path, MNEMOBUS_MEMORY__RECALL_DEADLINE_MS="soon"))
    assert proc.returncode == 2
    assert "MNEMOBUS_MEMORY__RECALL_DEADLINE_MS" in proc.stderr and "memory.recall_deadline_ms" in proc.stderr


def test_doctor_smoke_writes_reads_and_deletes_a_temporary_group(tmp_path):
    proc = _mnemobus("doctor", "--smoke", env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "smoke: ok" in proc.stdout and "smoke: deleted doctor-smoke-" in proc.stdout
    assert "store integrity: ok" in proc.stdout
    assert "doctor: all checks passed" in proc.stdout


def _store_with_a_damaged_index(path: Path) -> None:
    """A store of 60 facts whose facts' full-text index holds random bytes, as a build before 2026-11-29 left one
    after ~1,200 erasures."""
    import anyio

    from mnemobus.store.sqlite import SqliteStore
    from tests.store_damage import load_facts, scramble

    async def make() -> None:
        store = SqliteStore(path)
        await store.open()
        load_facts(store)
        await store.close()

    anyio.run(make)
    scramble(path, "facts_fts")


def test_doctor_names_a_damaged_full_text_index_and_the_command_that_mends_it(tmp_path):
    _store_with_a_damaged_index(tmp_path / "m.sqlite3")
    proc = _mnemobus("doctor", env=_env(tmp_path))
    failed = [line for line in proc.stdout.splitlines() if line.startswith("store integrity: FAILED")]
    assert proc.returncode == 1 and len(failed) == 1, proc.stdout
    assert "facts_fts" in failed[0] and "nothing lost" in failed[0] and "mnemobus doctor --repair" in failed[0]


def test_doctor_repair_rebuilds_a_damaged_index_and_then_passes(tmp_path):
    _store_with_a_damaged_index(tmp_path / "m.sqlite3")
    proc = _mnemobus("doctor", "--repair", env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "repair: rebuilt facts_fts" in proc.stdout and "store integrity: ok" in proc.stdout
    assert _mnemobus("doctor", env=_env(tmp_path)).returncode == 0


def test_doctor_reports_an_unreachable_nats_server(tmp_path):
    proc = _mnemobus("doctor", env=_env(tmp_path, MNEMOBUS_NATS__URL="nats://127.0.0.1:1",
                                        MNEMOBUS_NATS__CONNECT_TIMEOUT_S="0.5"), timeout=60)
    assert proc.returncode == 1 and "FAILED" in proc.stdout


def test_doctor_names_the_address_nobody_answers_at_before_trying_to_connect(tmp_path):
    proc = _mnemobus("doctor", env=_env(tmp_path, MNEMOBUS_NATS__URL="nats://ops:hunter22@127.0.0.1:1",
                                        MNEMOBUS_NATS__CONNECT_TIMEOUT_S="0.5"), timeout=60)
    failed = [line for line in proc.stdout.splitlines() if line.startswith("nats: FAILED")]
    assert proc.returncode == 1 and failed, proc.stdout
    assert "127.0.0.1:1" in failed[0] and "refused" in failed[0].lower()
    assert "hunter22" not in proc.stdout + proc.stderr


def test_sigterm_stops_a_serving_process_cleanly(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "mnemobus.cli", "run", "--demo"], cwd=ROOT, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "still serving" in line:
                break
        assert any("still serving" in ln for ln in lines), "".join(lines)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
