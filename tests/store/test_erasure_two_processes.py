"""An erasure and a write to the same group from two processes (store/erasures.py), on both stores: a write that
started before the erasure finished is erased too, never half-written and never bringing the group back; a write
that starts after it creates the group afresh."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from test_conformance import alice_graph  # same folder (pytest prepend import mode)

pytestmark = pytest.mark.anyio

WRITER = Path(__file__).with_name("erasure_writer.py")


def _where(store: GraphStore) -> tuple[str, str]:
    return (store.name, str(store.path)) if store.name == "sqlite" else (store.name, store.uri)  # type: ignore[attr-defined]


def _writer(store: GraphStore, group: GroupId, msg: str, rendezvous: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(WRITER), *_where(store), group, msg, str(rendezvous)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def _outcome(proc: subprocess.Popen[str]) -> str:
    out, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=120))
    assert proc.returncode == 0, err
    return out.strip()


async def _until_exists(path: Path, proc: subprocess.Popen[str]) -> None:
    with anyio.fail_after(120):
        while not path.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else "the writer died"
            await anyio.sleep(0.02)


async def _held(store: GraphStore, group: GroupId) -> tuple[int, int, int]:
    return (await store.count_episodes(group), len((await store.export_group(group)).entities),
            await store.count_facts(group))


async def test_a_write_under_way_in_another_process_when_its_group_is_erased_is_erased_too(
        store: GraphStore, group: GroupId, tmp_path: Path) -> None:
    await alice_graph(store, group)
    writer = _writer(store, group, "during", tmp_path)
    await _until_exists(tmp_path / "extracting", writer)  # the write has started: its group is erased now
    done = await store.delete_groups([group])
    (tmp_path / "go").touch()
    assert await _outcome(writer) == "GroupErased"
    assert done.episodes == 1
    assert await _held(store, group) == (0, 0, 0)  # not the episode, nor its entity: nothing came back


async def test_a_write_that_starts_after_the_erasure_creates_the_group_afresh(
        store: GraphStore, group: GroupId, tmp_path: Path) -> None:
    await alice_graph(store, group)
    await store.delete_groups([group])
    (tmp_path / "go").touch()
    assert await _outcome(_writer(store, group, "after", tmp_path)) == "stored"
    assert await _held(store, group) == (1, 1, 0)  # the new episode and its entity, none of the erased rows
