"""The floor under the plugin's relay: the same hops written straight on nats-py, no mnemobus code on the way.

Why: the plugin's CPU a request is its relay (receive, ask the executor, answer twice) plus memory. What the relay
alone must cost on this client library, in a Python process woken for each request, says how much of the plugin's
relay is ours to cut at all (`profile_request.py floor` runs this beside the plugin and compares them).

It answers `floor.request` as the plugin answers `agent.skill.request`: parse the request, ask `floor.execute`
(answered in this process, as the bench's stub executor is in the plugin's), answer the requester and a broadcast
subject. With `acked` it also puts two JetStream messages on the wire before the answer and waits for their
acks after it, as the plugin does with an exchange's two episodes.
"""

from __future__ import annotations

import asyncio
import json
import sys

import nats
from nats.js.api import RetentionPolicy, StorageType, StreamConfig

REQUEST = "floor.request"
EXECUTE = "floor.execute"
BROADCAST = "floor.response"
STREAM = "FLOOR"


async def main(url: str) -> None:
    nc = await nats.connect(url, name="relay-floor")
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=STREAM, subjects=["floor.episode.>"], retention=RetentionPolicy.LIMITS,
                                     storage=StorageType.FILE, max_msgs=100_000))

    async def execute(msg) -> None:  # the stub executor: read the request, answer in JSON
        body = json.loads(msg.data)
        await msg.respond(json.dumps({"content": f"Noted: {body['payload']['content']}"}).encode())

    async def relay(msg) -> None:
        body = json.loads(msg.data)
        reply = await nc.request(EXECUTE, msg.data, timeout=5)
        acks = []
        if msg.headers and msg.headers.get("acked"):
            for group in ("a", "b"):  # an exchange's episodes: on the wire before the answer, acked after it
                acks.append(await js.publish_async(f"floor.episode.{group}", msg.data))
        answer = json.dumps({"requestId": body.get("id"), "content": json.loads(reply.data)["content"]}).encode()
        await msg.respond(answer)
        await nc.publish(BROADCAST, answer)
        for ack in acks:
            await asyncio.wait_for(ack, 5)

    def spawned(handler):  # one task a message, as the plugin's endpoint runs each handler
        async def cb(msg) -> None:
            asyncio.get_running_loop().create_task(handler(msg))
        return cb

    await nc.subscribe(EXECUTE, queue="floor-executor", cb=spawned(execute))
    await nc.subscribe(REQUEST, queue="floor", cb=spawned(relay))
    await nc.flush()
    print("READY", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(15, stop.set)
    await stop.wait()
    await nc.drain()


if __name__ == "__main__":
    import uvloop

    uvloop.run(main(sys.argv[1]))
