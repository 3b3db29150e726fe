"""What the plugin puts on the connection for one exchange leaves in one socket write (issue 36).

An exchange sends its episodes (JetStream publishes, acknowledged later) and then its answer. Each send that
went once round the event loop let the client's flusher write what was queued so far on its own: a write, a
system call, a wake-up of the flusher per episode."""

from __future__ import annotations

import pytest

from mnemobus.shared import subjects
from mnemobus.bus.connection import Bus

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def bus(settings):  # type: ignore[no-untyped-def]
    bus = await Bus.connect(settings.nats.url or "", settings.nats, name="writes")
    await bus.ensure_streams()
    yield bus
    await bus.close()


def count_writes(bus: Bus, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Commands in each write the client makes to its socket."""
    transport = bus.nc._transport  # the client's socket writer: the one place every write goes through
    writes: list[int] = []
    real = transport.writelines

    def counted(commands):  # type: ignore[no-untyped-def]
        writes.append(len(commands))
        return real(commands)

    monkeypatch.setattr(transport, "writelines", counted)
    return writes


async def test_an_exchanges_episodes_and_answer_leave_in_one_write(bus: Bus, monkeypatch: pytest.MonkeyPatch) -> None:
    await (await bus.js_send("memory.episode.user_a", b"{}", msg_id="warm-up"))()  # the ack inbox, subscribed once
    writes = count_writes(bus, monkeypatch)
    acks = [await bus.js_send(f"memory.episode.{g}", b"{}", msg_id=f"exchange-{g}") for g in ("user_a", "agent_x__user_a")]
    await bus.publish("_INBOX.requester", b"the answer")
    await bus.publish("agent.skill.response.x", b"the answer")
    for ack in acks:
        assert (await ack()).stream == subjects.EPISODE_STREAM  # each episode stored, as before
    assert writes[0] == 4, writes  # both episodes and both answers, in the order sent
