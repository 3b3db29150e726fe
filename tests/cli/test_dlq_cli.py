"""`mnemobus dlq` tells the truth (issue 41): a limited listing says how many exist, and a replay names the
letters it kept because the worker would dead-letter them again, with the reason."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus
from mnemobus.bus.server import EmbeddedNatsServer
from mnemobus.shared.config import NatsSettings
from mnemobus.shared.envelope import DeadLetter, EpisodeMessage
from tests.cli.test_cli import ROOT, _env


def _letter(subject: str, data: str, reason: str) -> bytes:
    return DeadLetter(reason=reason, error="as it failed then", original_subject=subject, group_id="dlq_g",
                      data=data, data_bytes=len(data)).model_dump_json().encode()


@pytest.fixture
def four_letters(tmp_path: Path) -> Iterator[str]:
    """A bus holding 4 dead letters of group dlq_g: 2 episodes that would now be stored, 1 whose JSON is broken
    and 1 that names another group than its subject's."""
    server = EmbeddedNatsServer(tmp_path / "nats-dlq")
    url = server.start()
    good = [EpisodeMessage(episode_id=f"ep-{i}", group_id="dlq_g", content=f"message {i}",
                           source_message_id=f"m{i}").to_wire().decode() for i in (1, 2)]
    other = EpisodeMessage(episode_id="ep-3", group_id="dlq_other", content="x", source_message_id="m3")

    async def fill() -> None:
        bus = await Bus.connect(url, NatsSettings(url=url))
        try:
            await bus.ensure_streams()
            episode = subjects.episode("dlq_g")
            for data, reason in [(good[0], "store_unavailable"), ('{"episode_id": ', "malformed_json"),
                                 (good[1], "store_unavailable"), (other.to_wire().decode(), "group_mismatch")]:
                await bus.js_publish(subjects.dlq("dlq_g"), _letter(episode, data, reason))
        finally:
            await bus.close()

    anyio.run(fill)
    yield url
    server.stop()


def _dlq(*args: str, url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mnemobus.cli", "dlq", *args], cwd=ROOT,
                          env=_env(tmp_path, MNEMOBUS_NATS__URL=url), capture_output=True, text=True, timeout=120)


def test_a_limited_listing_says_how_many_of_how_many_it_shows(four_letters: str, tmp_path: Path) -> None:
    proc = _dlq("list", "--limit", "2", url=four_letters, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 of 4 dead letter(s) shown (--limit 2)" in proc.stdout
    assert proc.stdout.count("\n#") + proc.stdout.startswith("#") == 2


def test_replay_names_each_letter_it_kept_and_why(four_letters: str, tmp_path: Path) -> None:
    proc = _dlq("replay", url=four_letters, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "replayed 2 dead letter(s); skipped 0 truncated one(s); kept 2 that would be dead-lettered again" \
        in proc.stdout
    kept = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("kept #")]
    assert len(kept) == 2
    assert "malformed_json" in kept[0] and "group_mismatch" in kept[1] and "dlq_other" in kept[1]
    listed = _dlq("list", url=four_letters, tmp_path=tmp_path)
    assert "2 of 2 dead letter(s) shown" in listed.stdout
