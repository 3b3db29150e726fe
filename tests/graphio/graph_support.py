"""A small group built through the engine's own ingestion (offline extractor), shared by the graphio tests.

Five turns of Josh's: a sister in Paris, a job at Acme he later leaves (an ended fact), a dog, a move."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mnemobus.engine import MemoryEngine
from mnemobus.engine.embedders import make_embedder
from mnemobus.shared.groups import GroupId
from mnemobus.store.contract import GraphStore
from mnemobus.store.model import Episode, episode_id_for

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2025, 1, 1, tzinfo=UTC)
TURNS = ("My sister Anna lives in Paris.", "I work at Acme as a nurse.", "I have a dog called Max.",
         "I no longer work at Acme.", "I moved to Berlin last month.")


def turns(group: GroupId) -> list[Episode]:
    return [Episode(id=episode_id_for(group, f"m{i}", "user"), group_id=group, content=text, role="user",
                    source_message_id=f"m{i}", reference_time=T0 + timedelta(days=30 * i), speaker="Josh")
            for i, text in enumerate(TURNS)]


async def build_josh(store: GraphStore, group: GroupId) -> MemoryEngine:
    """The five turns ingested as the worker ingests a batch; the engine, for more."""
    engine = MemoryEngine(store, embedder=make_embedder("hash", "", None))
    outcomes = await engine.ingest_many(turns(group))
    assert all(not isinstance(o, BaseException) and o.created for o in outcomes), outcomes
    return engine


def cli_env(sqlite_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"MNEMOBUS_STORE__SQLITE_PATH": str(sqlite_path), "MNEMOBUS_METRICS__PORT": "0",
                "MNEMOBUS_MEMORY__EMBEDDING__PROVIDER": "hash", **extra})
    return env


def mnemobus(*args: str, env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The real command line in its own process."""
    return subprocess.run([sys.executable, "-m", "mnemobus.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
