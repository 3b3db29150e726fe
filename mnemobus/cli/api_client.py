"""One request to the running memory service's `memory.api.*`, for the commands that ask it (memory, graph)."""

from __future__ import annotations

import json
from typing import Any

from mnemobus.shared import subjects
from mnemobus.shared.config import Settings


async def request_api(settings: Settings, endpoint: str, data: bytes, timeout_s: float, client: str) -> Any:
    """The service's JSON answer; RuntimeError naming why when there is no service to ask or it refused."""
    from mnemobus.kernel.app import nats_url, running_embedded_url
    from mnemobus.bus.connection import Bus

    if not settings.nats.url and running_embedded_url(settings.nats.data_dir) is None:
        raise RuntimeError(f"the {client} commands talk to a running service: set nats.url (MNEMOBUS_NATS__URL), "
                           f"or run them next to `mnemobus run` on {settings.nats.data_dir}")
    headers = None
    if (key := settings.api.api_key) is not None:
        headers = {"Authorization": f"Bearer {key.get_secret_value()}"}
    async with nats_url(settings) as (url, _server, nats_settings):
        bus = await Bus.connect(url, nats_settings, name=f"mnemobus-cli-{client}")
        try:
            msg = await bus.request(subjects.api(endpoint), data, timeout_s, headers=headers)
        finally:
            await bus.close()
    if msg.headers and "Nats-Service-Error" in msg.headers:
        raise RuntimeError(f"memory service refused: {msg.headers['Nats-Service-Error']}")
    return json.loads(msg.data)
