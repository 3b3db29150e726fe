"""The `api` config section: where the memory service listens and what it asks of callers.

Until the lead wires it into `Settings`, `api_settings()` falls back to the
defaults, so the role runs unchanged on a config without the section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, SecretStr

if TYPE_CHECKING:
    from mnemobus.config import Settings


class ApiSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    http: bool = Field(default=True, description="serve the Graphiti-compatible HTTP API (NATS endpoints always run)")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535, description="0 binds a free port (tests); the bound URL is logged")
    api_key: SecretStr | None = Field(default=None, description="when set, HTTP and NATS requests must carry it")
    max_inflight: int = Field(default=64, ge=1, le=10_000, description="concurrent NATS requests per endpoint")
    drain_timeout_s: float = Field(default=10.0, gt=0, description="how long in-flight requests may finish at stop")
    search_timeout_s: float = Field(default=5.0, gt=0, description="a search or get-memory past this answers 504")


def api_settings(settings: "Settings") -> ApiSettings:
    """The `api` section of the settings, or the defaults when the section does not exist yet."""
    found = getattr(settings, "api", None)
    return found if isinstance(found, ApiSettings) else ApiSettings()
