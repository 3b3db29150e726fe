"""Tests share one nats-server: each starts with no stream an earlier test left, and own_server tests get their own.

The first two tests run in this order (pytest keeps a module's order): one leaves a stream behind, the next
finds none.
"""

from __future__ import annotations

import nats
import pytest
from nats.js.api import StreamConfig

from mnemobus.bus.server import EmbeddedNatsServer
from mnemobus.kernel.testing import empty_jetstream, stream_dirs
from mnemobus.shared.config import Settings

pytestmark = pytest.mark.anyio


async def _stream_names(url: str) -> list[str]:
    nc = await nats.connect(url)
    try:
        return [info.config.name for info in await nc.jetstream().streams_info()]
    finally:
        await nc.close()


async def test_a_test_may_leave_a_stream_on_the_shared_server(settings: Settings) -> None:
    nc = await nats.connect(settings.nats.url)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="LEFT_BEHIND", subjects=["left.behind.>"]))
        for _ in range(300):  # files on disk: the server removes them after it answers the deletion
            await js.publish("left.behind.x", b"x" * 200)
    finally:
        await nc.close()
    assert "LEFT_BEHIND" in await _stream_names(settings.nats.url)


async def test_the_next_test_finds_the_shared_server_without_it(settings: Settings, nats_url: str) -> None:
    assert settings.nats.url == nats_url
    assert await _stream_names(nats_url) == []


async def test_the_next_test_starts_once_the_deleted_streams_files_are_gone(
        settings: Settings, nats_server: EmbeddedNatsServer | None) -> None:
    """A stream made again while the deleted one's files were still on disk failed with "error creating store for
    stream" (fresh-clone CI): on the same connection, right after the deletion's answer, the folder was still there
    in 36 of 40 tries here. Emptying the server waits for the folders, so the next stream of the name is new."""
    if nats_server is None:
        pytest.skip("--nats-url: the server's disk is not ours to look at")
    nc = await nats.connect(settings.nats.url)
    try:
        js = nc.jetstream()
        await js.add_stream(StreamConfig(name="LEFT_BEHIND", subjects=["left.behind.>"]))
        for _ in range(300):
            await js.publish("left.behind.x", b"x" * 200)
    finally:
        await nc.close()
    assert stream_dirs(nats_server)
    empty_jetstream(settings.nats.url, server=nats_server)
    assert stream_dirs(nats_server) == []


@pytest.mark.own_server
async def test_an_own_server_test_gets_a_server_of_its_own(settings: Settings, nats_url: str, own_nats_server) -> None:  # type: ignore[no-untyped-def]
    assert settings.nats.url == own_nats_server.url != nats_url
