"""A role started alone behaves as its user expects, seen only from outside."""

from __future__ import annotations

import time

import httpx

from tests.blackbox.conftest import service_process


def test_the_api_role_alone_on_its_embedded_bus_stores_what_it_accepts(tmp_path) -> None:
    with service_process(tmp_path, role="api") as url:
        r = httpx.post(f"{url}/messages", json={"group_id": "g1", "messages": [
            {"role_type": "user", "role": "ana", "content": "I keep bees in my garden"}]}, timeout=10)
        assert r.status_code == 202
        listed: list = []
        deadline = time.monotonic() + 20
        while not listed and time.monotonic() < deadline:
            listed = httpx.get(f"{url}/episodes/g1", params={"last_n": 5}, timeout=10).json()
            time.sleep(0.2)
        assert [e["content"] for e in listed] == ["ana(user): I keep bees in my garden"]
