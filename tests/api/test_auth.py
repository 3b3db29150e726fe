"""With an API key configured, HTTP and NATS requests without it are refused."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from mnemobus.shared.config import ApiSettings
from tests.api.conftest import Api

pytestmark = pytest.mark.anyio

KEY = "s3cret-key"


@pytest.fixture
def api_config() -> ApiSettings:
    return ApiSettings(port=0, api_key=SecretStr(KEY), drain_timeout_s=2)


async def test_http_request_without_the_key_is_401(api: Api) -> None:
    r = await api.http.post("/search", json={"group_ids": ["g"], "query": "x"})
    assert r.status_code == 401


async def test_http_request_with_a_wrong_key_is_401(api: Api) -> None:
    r = await api.http.post("/search", json={"group_ids": ["g"], "query": "x"}, headers={"X-API-Key": "nope"})
    assert r.status_code == 401


async def test_http_request_with_the_bearer_key_is_served(api: Api) -> None:
    r = await api.http.post("/search", json={"group_ids": ["g"], "query": "x"},
                            headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200


async def test_healthcheck_stays_open_for_liveness_probes(api: Api) -> None:
    assert (await api.http.get("/healthcheck")).status_code == 200


async def test_nats_request_without_the_key_is_refused_with_401(api: Api) -> None:
    _, headers = await api.nats("search", {"group_ids": ["g"], "query": "x"}, headers={})
    assert headers["Nats-Service-Error-Code"] == "401"


async def test_nats_request_with_the_key_is_served(api: Api) -> None:
    body, headers = await api.nats("search", {"group_ids": ["g"], "query": "x"},
                                   headers={"Authorization": f"Bearer {KEY}"})
    assert "Nats-Service-Error-Code" not in headers and body == {"facts": []}
