"""Frames on a child process's stdin/stdout: a 4-byte big-endian length, then a pickle.

Why one module: two children speak it (label propagation, `propagation_child`; the parser's second core,
`parse_child`), and a frame written one way and read another would be a silent protocol break.
"""

from __future__ import annotations

import pickle
import struct
from typing import BinaryIO

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

HEADER = struct.Struct(">I")


def read_frame(stream: BinaryIO) -> object | None:
    """The next message, or None at end of input (the parent closed the pipe or died)."""
    head = stream.read(HEADER.size)
    if len(head) < HEADER.size:
        return None
    size = HEADER.unpack(head)[0]
    body = stream.read(size)
    if len(body) < size:
        return None
    return pickle.loads(body)


def frame(message: object) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


async def receive_frame(answers: BufferedByteReceiveStream) -> object:
    """The next message from a child's stdout; IncompleteRead or EndOfStream when the child is gone."""
    size = HEADER.unpack(await answers.receive_exactly(HEADER.size))[0]
    return pickle.loads(await answers.receive_exactly(size))


async def kill_child(process: Process | None) -> bool:
    """Kill a child still running and reap it, even from a cancelled caller; False when there was none to kill."""
    if process is None or process.returncode is not None:
        return False
    process.kill()
    with anyio.CancelScope(shield=True):
        await process.wait()
    return True
