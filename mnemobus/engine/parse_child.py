"""The child process that parses a share of a batch for `ProcessSplitExtractor` (`python -m` this module).

Why a process: the parse is the largest single cost of offline ingestion (a core runs spaCy at ~700 lines/s), and
a thread of the same process cannot run it beside the rest (the GIL). Here a second core parses one share of a
batch while the parent parses the other.

Protocol on stdin/stdout (engine/frames.py): parent to child ("extract", episodes, previous, known) answers
("extracted", [Extraction or Exception, ...], named) in the order given, exactly what `ParsedExtractor.extract_batch`
returns in the parent; `known` and `named` are whom turns named (`ParsedExtractor.named`), the turns before the chunk
that the parent read and the chunk's own, so a group that moves between the processes from one batch to the next has
its turns before parsed by neither again; ("warm",) loads the parser and answers ("warm",). End of input ends the
child.
"""

from __future__ import annotations

import pickle
import sys
from typing import BinaryIO

from mnemobus.engine.extract_parse import ParsedExtractor, load_pipeline
from mnemobus.engine.frames import frame, read_frame


def sendable(result: object) -> object:
    """An episode's exception as it is when it pickles, else as a RuntimeError naming it (one odd exception must not
    lose the batch's answer)."""
    if not isinstance(result, Exception):
        return result
    try:
        pickle.dumps(result)
    except Exception:  # noqa: BLE001 - any failure to pickle
        return RuntimeError(f"{type(result).__name__}: {result}")
    return result


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    extractor = ParsedExtractor()
    while (message := read_frame(inp)) is not None:
        kind, *rest = message  # type: ignore[misc]
        if kind == "warm":
            load_pipeline()
            out.write(frame(("warm",)))
        elif kind == "extract":
            episodes, previous, known = rest
            extractor.learn_named(known)  # the turns before that the parent (or an earlier chunk here) read
            results = [sendable(x) for x in extractor.extract_batch(episodes, previous)]
            out.write(frame(("extracted", results, extractor.named(ep.id for ep in episodes))))
        else:
            raise ValueError(f"parse child: unknown message {kind!r}")
        out.flush()


def main() -> None:
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but frames on the protocol pipe
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
