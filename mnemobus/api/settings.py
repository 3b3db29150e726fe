"""The `api` config section: where the memory service listens and what it asks of callers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

class ApiSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    http: bool = Field(default=True, description="serve the Graphiti-compatible HTTP API (NATS endpoints always run)")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535, description="0 binds a free port (tests); the bound URL is logged")
    api_key: SecretStr | None = Field(default=None, description="when set, HTTP and NATS requests must carry it")
    max_inflight: int = Field(default=64, ge=1, le=10_000, description="concurrent NATS requests per endpoint")
    drain_timeout_s: float = Field(default=10.0, gt=0, description="how long in-flight requests may finish at stop")
    search_timeout_s: float = Field(default=5.0, gt=0, description="a search or get-memory past this answers 504")
