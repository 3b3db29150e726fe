"""Taking a serving process's long-lived objects out of the cyclic collector's sight, once they are loaded.

Why: after start-up a serving process holds millions of objects that live as long as it does (the embedder's
tables, the parser, the held fact graphs of its warmed groups). None of them is ever garbage, yet every full
collection walks them all, on whichever thread allocated last: often a recall, on the request path (a 20 ms
pause at 10k facts a group, 53-86 ms at 100k; docs/performance.md). `gc.freeze()` moves what is tracked now into
a generation the collector never scans; objects made later are collected as before, and frozen ones still die
by reference counting (only a cycle among them would stay). So it is done at a few moments of a process's life
(start-up done, warming done), never per request, and only in a process the project's own entry point started:
an application embedding the engine keeps its own collector policy.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("mnemobus.heap")

_serving = False


def serving_process() -> None:
    """Said once by a serving process's entry point (`mnemobus run`): its long-lived objects may be frozen."""
    global _serving
    _serving = True


def freeze_long_lived(why: str) -> int:
    """In a serving process: freeze what is tracked now. The objects frozen in all (0 where the process is not a
    serving one). No collection first: on a start-up heap a full one held the event loop past a worker's
    heartbeat freshness (1.5 s in the tests) on a loaded machine, and what it would free is start-up's few cycles."""
    if not _serving:
        return 0
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.debug("%s: %d long-lived objects taken out of the collector's sight", why, frozen)
    return frozen
