"""The test suite's static table folder: one per machine, renamed whenever what the table is computed from changes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mnemobus.engine import embed_static
from mnemobus.kernel.static_table_cache import ENV, UNUSED_DAYS, machine_cache_dir, table_key

MODEL = "all-MiniLM-L6-v2-int8"


def test_the_folder_is_the_same_while_nothing_the_table_depends_on_changes(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = machine_cache_dir(MODEL)
    assert first == machine_cache_dir(MODEL)
    assert first.parent == tmp_path / "mnemobus" / "static-embeddings" and first.is_dir()


def test_a_change_to_the_distillation_code_names_a_new_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    before = table_key(MODEL)
    edited = tmp_path / "embed_static.py"
    edited.write_text(Path(embed_static.__file__).read_text().replace("_BATCH = 1024", "_BATCH = 512"))
    monkeypatch.setattr(embed_static, "__file__", str(edited))
    assert table_key(MODEL) != before


def test_the_environment_names_another_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "fresh"))
    assert machine_cache_dir(MODEL) == tmp_path / "fresh" and (tmp_path / "fresh").is_dir()


def _aged(folder: Path, days: float) -> Path:
    folder.mkdir(parents=True)
    (folder / "static.npy").write_bytes(b"table")
    then = time.time() - days * 86400
    os.utime(folder, (then, then))
    return folder


def test_a_superseded_table_no_run_has_used_for_weeks_is_removed_and_a_recent_one_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tables = tmp_path / "mnemobus" / "static-embeddings"
    stale = _aged(tables / "old-version", UNUSED_DAYS + 1)
    other_branch = _aged(tables / "other-branch", UNUSED_DAYS - 1)
    current = machine_cache_dir(MODEL)
    assert not stale.exists()
    assert (other_branch / "static.npy").exists() and current.is_dir()
