"""Emptying a server's JetStream: how the test suite shares one nats-server between tests.

Why in bus/: it is the only place nats-py is imported. Nothing in the product calls it.
"""

from __future__ import annotations

import nats


async def delete_every_stream(url: str, timeout_s: float = 10) -> int:
    """Delete every stream on the server at `url` (their consumers, KV buckets and object stores go with them);
    how many there were."""
    nc = await nats.connect(url, connect_timeout=timeout_s, allow_reconnect=False, max_reconnect_attempts=0)
    deleted = 0
    try:
        js = nc.jetstream(timeout=timeout_s)
        while streams := await js.streams_info():
            for info in streams:
                await js.delete_stream(info.config.name)
                deleted += 1
    finally:
        await nc.close()
    return deleted
