"""The life-cycle settings are refused at start when invalid, and the worker's upkeep stops with the worker."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mnemobus.shared.config import Settings, load_settings
from mnemobus.shared.errors import ConfigError
from mnemobus.shared.metrics import PipelineMetrics
from mnemobus.store.sqlite import SqliteStore
from mnemobus.kernel.upkeep import run_upkeep

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("yaml, field, reason", [
    ("decay:\n  factor: 1.5\n", "decay.factor", "less than or equal to 1"),
    ("decay:\n  interval_s: 0\n", "decay.interval_s", "greater than 0"),
    ("retention:\n  ended_days: -3\n", "retention.ended_days", "greater than 0"),
    ("retention:\n  entity_cap: 0\n", "retention.entity_cap", "greater than or equal to 1"),
    ("promotion:\n  budget_share: 0\n", "promotion.budget_share", "greater than 0"),
    ("retention:\n  keep_forever: true\n", "retention.keep_forever", "Extra inputs are not permitted"),
])
def test_an_invalid_lifecycle_setting_is_refused_naming_file_field_and_reason(tmp_path: Path, yaml: str, field: str,
                                                                              reason: str) -> None:
    path = tmp_path / "mnemobus.yaml"
    path.write_text(yaml)
    with pytest.raises(ConfigError) as refused:
        load_settings(path)
    assert str(path) in str(refused.value) and f"field '{field}'" in str(refused.value)
    assert reason in str(refused.value)


async def test_the_upkeep_loop_returns_as_soon_as_the_worker_stops(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    await store.open()
    stop = anyio.Event()
    ended = anyio.Event()
    settings = Settings(retention={"interval_s": 3600}, decay={"interval_s": 3600})

    async def upkeep() -> None:
        await run_upkeep(store, settings, PipelineMetrics().lifecycle, stop)
        ended.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(upkeep)
            await anyio.sleep(0)
            stop.set()
            with anyio.fail_after(5):  # an hour-long wait must end with the stop, not with the hour
                await ended.wait()
    finally:
        await store.close()
