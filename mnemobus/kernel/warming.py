"""Start-up loading of the recently written groups' recall indexes, once per process.

Why: on an in-process store a group's first recall loads its graph and vectors
(150-250 ms at 10k facts, ~2.8 s at 100k on SQLite), past the plugin's deadline
and an API caller's patience, so after every restart each active user's first
request would go on unenriched. The plugin and the API both serve recalls; a
process running both shares one engine and loads it once.
"""

from __future__ import annotations

import logging
import time

import anyio

from mnemobus.engine import MemoryEngine
from mnemobus.kernel.heap import freeze_long_lived
from mnemobus.shared.groups import GroupId
from mnemobus.shared.metrics import PipelineMetrics
from mnemobus.store.contract import Warming

log = logging.getLogger("mnemobus.warming")


async def warm_recall_indexes(engine: MemoryEngine | None, max_groups: int, metrics: PipelineMetrics,
                              groups_prefix: str = "") -> list[GroupId]:
    """Load up to `max_groups` groups (of those whose id starts with `groups_prefix`), most recently written first,
    unless this engine was warmed already; the groups loaded. A failure is logged and counted, never raised: a
    cold cache is slower, never wrong."""
    if engine is None or max_groups <= 0 or not isinstance(engine.store, Warming) or not engine.claim_warming():
        return []
    started = time.perf_counter()
    try:
        groups = await engine.store.warm(max_groups, groups_prefix)
    except Exception as exc:  # noqa: BLE001
        metrics.index_warms.labels(outcome="failed").inc()
        log.warning("warming the recall indexes failed (recall loads each group on first use): %s", exc)
        return []
    metrics.index_warms.labels(outcome="ok").inc()
    metrics.warmed_groups.set(len(groups))
    log.info("recall indexes of %d recently active group(s) loaded in %.1f s", len(groups),
             time.perf_counter() - started)
    freeze_long_lived("recall indexes warmed")  # the loaded graphs live as long as the process
    return groups


async def warm_engine(engine: MemoryEngine) -> None:
    """Load the embedder (building the static table the first time, with progress in the log) and open the store
    before the first request pays for it. A failure is logged: a cold first request is better than no start."""
    try:
        # the embedder and the store themselves, not a recall: a recall needs a group, and every group id a recall
        # accepts could be somebody's (ids starting with '_' are refused at every door, issue 34)
        if engine.embedder is not None:
            await anyio.to_thread.run_sync(engine.embedder.embed, ["warm up"])
        await engine.store.ping()
    except Exception as exc:  # noqa: BLE001
        log.warning("engine warm-up failed: %s", exc)
