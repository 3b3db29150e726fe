"""The child process that runs label propagation for `ProcessPropagator` (`python -m` this module).

Why a process: propagation over a large group is seconds of pure Python; in a thread it holds the GIL and recall
on the same event loop waited behind it (recall p99 4.6x its idle figure beside a refresh, bench-lifecycle). The
child keeps each run's state between time slices, keyed by the parent's run key, and forgets it once finished.

Protocol on stdin/stdout: frames of a 4-byte big-endian length and a pickle. Parent to child: ("edges", key,
triples) appends edges and ("keys", key, {entity id: node key}) adds node keys (no answer); ("run", key, group,
budget_s, max_iterations, members, facts) answers
("missing",) when the key has no edges here (a fresh child after a kill), ("sliced",) when the budget ran out,
else ("found", parts) followed by `parts` frames of ("part", [Picked, ...]); ("forget", key) drops a run; ("summaries", key, spec, items) makes each item's summary text (an item is a
Sketch, made into the offline text here, or a text made elsewhere) and, with an embedder spec, its vector: answers
("summaries", parts) followed by `parts` frames of ("part", texts, vectors or None). End of input ends the child.

The summaries are made here for the same reason as the propagation: building and embedding ~3,500 texts after a
200k-fact refresh was CPU in the worker's process, in recall's tail. Started with `--nice N`, the child lowers its
own priority, so on a machine with fewer free cores than busy processes recall is scheduled before it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from mnemobus.engine.community_summary import Sketch, offline_summary
from mnemobus.engine.embed import Embedder
from mnemobus.engine.embedders import EmbedderSpec, make_embedder
from mnemobus.engine.frames import frame, read_frame
from mnemobus.engine.label_propagation import Propagation, Triple

PART = 500  # communities per answer frame: the parent unpickles one frame at a time between its other tasks


def summaries(items: Sequence[Sketch | str], embedder: Embedder | None) -> Iterator[tuple]:
    """The answer frames for ("summaries", ...): texts and vectors, PART at a time."""
    texts = [offline_summary(item) if isinstance(item, Sketch) else item for item in items]
    parts = [texts[i:i + PART] for i in range(0, len(texts), PART)]
    yield ("summaries", len(parts))
    for part in parts:
        yield ("part", part, None if embedder is None else embedder.embed(part))


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    edges: dict[str, list[Triple]] = {}
    runs: dict[str, Propagation] = {}
    keys: dict[str, dict[str, str]] = {}
    embedders: dict[EmbedderSpec, Embedder] = {}  # loaded once (a static table is ~47 MB)
    while (message := read_frame(inp)) is not None:
        kind, key, *rest = message  # type: ignore[misc]
        if kind == "edges":
            edges.setdefault(key, []).extend(rest[0])
        elif kind == "keys":
            keys.setdefault(key, {}).update(rest[0])
        elif kind == "forget":
            edges.pop(key, None)
            keys.pop(key, None)
            runs.pop(key, None)
        elif kind == "run":
            group, budget_s, max_iterations, members, facts = rest
            deadline = time.monotonic() + budget_s
            if key not in runs and key not in edges:
                out.write(frame(("missing",)))
            else:
                propagation = runs.get(key) or Propagation(edges.pop(key, []), keys.pop(key, None))
                runs[key] = propagation
                if not propagation.run(lambda: time.monotonic() > deadline, max_iterations):
                    out.write(frame(("sliced",)))
                else:
                    del runs[key]
                    picked = propagation.picked(group, members, facts)
                    parts = [picked[i:i + PART] for i in range(0, len(picked), PART)]
                    out.write(frame(("found", len(parts))))
                    for part in parts:
                        out.write(frame(("part", part)))
        elif kind == "summaries":
            spec, items = rest
            embedder = None if spec is None else embedders.get(spec) or embedders.setdefault(spec, make_embedder(*spec))
            for answer in summaries(items, embedder):
                out.write(frame(answer))
        else:
            raise ValueError(f"propagation child: unknown message {kind!r}")
        out.flush()


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--nice":
        os.nice(int(sys.argv[2]))
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the protocol pipe
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
