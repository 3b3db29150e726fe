"""Shared fixtures for the whole suite (the nats-server ones come from mnemobus.kernel.testing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mnemobus.kernel.static_table_cache import machine_cache_dir
from mnemobus.shared.config import Settings


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    path = tmp_path / "users.yaml"
    path.write_text(
        "users:\n"
        "  - id: josh\n    displayName: Josh\n    admin: true\n"
        "    identities:\n      discord: '111'\n      github: bioshazard\n"
        "  - id: quiet\n    memoryEnabled: false\n    identities:\n      discord: '999'\n"
    )
    return path


@pytest.fixture
def settings(tmp_path: Path, fresh_nats_url: str, users_file: Path) -> Settings:
    """Settings for a test: the session's nats-server emptied of streams (a private one for own_server tests), a
    private SQLite file, short timeouts."""
    return suite_settings(tmp_path, fresh_nats_url, users_file)


def suite_settings(tmp_path: Path, nats_url: str, users_file: Path) -> Settings:
    """The `settings` fixture's values on a folder, server and users file of the caller's (a module-scoped runtime's,
    which no function-scoped fixture can give)."""
    return Settings(
        nats={"url": nats_url, "max_message_bytes": 64 * 1024},
        store={"backend": "sqlite", "sqlite_path": tmp_path / "memory.sqlite3"},
        # shedding on loop lag and on the recall time share is off: a busy test machine (a Neo4j JVM starting) must
        # not decide what recall returns
        memory={"executor_timeout_s": 2, "recall_deadline_ms": 500, "embedding": {"provider": "hash"}, "shed_loop_lag_ms": 0, "recall_time_share": 0,
                "outbox_path": tmp_path / "outbox.sqlite3"},
        worker={"backoff_s": [0.05, 0.1, 0.2], "max_deliver": 4, "ack_wait_s": 5, "heartbeat_s": 0.5},
        identity={"users_file": users_file, "reload_interval_s": 0.1},
        metrics={"port": 0},
    )


@pytest.fixture(scope="session")
def static_cache_dir() -> Path:
    """The static embedding table's folder: one per machine and per version of what the table is computed from
    (mnemobus/kernel/static_table_cache.py), so a run builds it only when the model or the distillation changed;
    StaticEmbedder's file lock makes other workers and runs wait for that build."""
    return machine_cache_dir("all-MiniLM-L6-v2-int8")
