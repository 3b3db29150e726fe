"""Settings: `workspace/mnemobus.yaml`, overridden by `MNEMOBUS_*` environment variables.

Nested keys use `__` (``MNEMOBUS_NATS__URL``). Anything invalid stops start-up
with the file (or variable), the field and the reason, so a typo never runs
as a silently degraded service.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mnemobus.api.settings import ApiSettings
from mnemobus.errors import ConfigError

ENV_PREFIX = "MNEMOBUS_"
DEFAULT_CONFIG = Path("workspace/mnemobus.yaml")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NatsSettings(Section):
    url: str | None = Field(default=None, description="nats:// URL; empty starts an embedded nats-server")
    data_dir: Path = Path("data/nats")
    connect_timeout_s: float = Field(default=2.0, gt=0)
    request_timeout_s: float = Field(default=2.0, gt=0)
    max_message_bytes: int = Field(default=256 * 1024, gt=1024, description="larger messages are dead-lettered")
    episode_duplicate_window_s: float = Field(default=24 * 3600, gt=0)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        if not v.startswith(("nats://", "tls://", "ws://", "wss://")):
            raise ValueError("must start with nats://, tls://, ws:// or wss://")
        return v.strip()


class Neo4jSettings(Section):
    uri: str = "bolt://127.0.0.1:7687"
    user: str | None = None
    password: SecretStr | None = None
    database: str | None = None


class StoreSettings(Section):
    backend: Literal["sqlite", "neo4j"] = "sqlite"
    sqlite_path: Path = Path("data/mnemobus.sqlite3")
    vector_cache_mb: int = Field(default=512, ge=16, description="per process, both backends: each group's "
                                 "vectors and graph kept in memory, least recently used groups evicted (SQLite: the "
                                 "graphs get a quarter of this on top); 1M facts with their entities need ~1.8 GB "
                                 "of vectors to stay warm")
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)


class EmbeddingSettings(Section):
    provider: Literal["local", "static", "hash"] = Field(
        default="static", description="local: the ONNX transformer; static: a token table distilled from it "
        "(~1000x faster, somewhat less precise); hash: deterministic, for tests")
    model: str = "all-MiniLM-L6-v2-int8"
    cache_dir: Path = Field(default=Path("data/embeddings"), description="where the static table is cached")
    batch_size: int = Field(default=64, gt=0)


class MemorySettings(Section):
    recall_deadline_ms: float = Field(default=150, gt=0)
    max_facts: int = Field(default=10, ge=0, le=100)
    max_episodes: int = Field(default=3, ge=0, le=50)
    context_budget_chars: int = Field(default=2000, ge=200)
    executor_timeout_s: float = Field(default=30.0, gt=0)
    form_every_n_messages: int = Field(default=1, ge=1, description="emit an episode every N exchanges of a session")
    form_every_n_tokens: int = Field(default=0, ge=0, description="...or once the buffered text reaches ~N tokens (0: off)")
    exclude_skills: list[str] = Field(default_factory=lambda: ["alert"],
                                      description="skills that neither read nor write memory (alerts, planner chatter)")
    breaker_failures: int = Field(default=5, ge=1, description="consecutive recall failures that open the breaker")
    breaker_cooldown_s: float = Field(default=10, gt=0)
    max_concurrent_recalls: int = Field(
        default=4, ge=1, description="recalls in flight per plugin process; a request that finds no free slot "
        "within the deadline goes on unenriched (status overloaded), and with as many already waiting as running "
        "it goes on at once: an overload costs memory, never latency")
    warm_groups: int = Field(
        default=64, ge=0, description="at start, each plugin or memory API process loads the in-memory indexes of this many of "
        "the most recently written groups (within store.vector_cache_mb), so their first recall after a restart "
        "is not spent loading them (0: none)")
    recall_time_share: float = Field(
        default=0.6, ge=0, description="seconds of recall per second each plugin process may spend (summed over "
        "the recalls it runs at once); past it a recall that would run beside another is skipped (status "
        "overloaded) until time accrues again (one alone always runs: it delays no one), so an overload leaves "
        "the CPU to relaying rather than starving nats-server and the executors (0: no limit)")
    shed_loop_lag_ms: float = Field(
        default=50, ge=0, description="skip recall (status overloaded) while the plugin's event loop runs this far "
        "behind: the process is out of CPU, and relaying unenriched keeps every request prompt (0: never)")
    outbox_path: Path = Field(default=Path("data/outbox.sqlite3"),
                              description="episodes the stream refused wait here until it takes them")
    form_cold_after_s: float = Field(default=600, gt=0, description="flush a buffered session idle this long")
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)


class WorkerSettings(Section):
    batch: int = Field(default=32, ge=1, le=1000, description="episodes fetched and ingested as one engine batch")
    max_deliver: int = Field(default=6, ge=2)
    backoff_s: list[float] = Field(default_factory=lambda: [0.5, 1, 2, 4, 8])
    ack_wait_s: float = Field(default=30, gt=0)
    heartbeat_s: float = Field(default=5, gt=0)

    @field_validator("backoff_s")
    @classmethod
    def _backoff(cls, v: list[float]) -> list[float]:
        if not v or any(x <= 0 for x in v):
            raise ValueError("must be a non-empty list of positive seconds")
        return v


class IdentitySettings(Section):
    users_file: Path = Path("workspace/users.yaml")
    reload_interval_s: float = Field(default=2.0, gt=0)


class MetricsSettings(Section):
    port: int = Field(default=9464, ge=0, le=65535, description="0 disables the /metrics listener")
    host: str = "127.0.0.1"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", case_sensitive=False
    )

    nats: NatsSettings = Field(default_factory=NatsSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environment beats the YAML file (passed as init values); sources deep-merge
        return (env_settings, init_settings)


def _describe(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _origin(loc: tuple[Any, ...], path: Path | None) -> str:
    for depth in range(len(loc), 0, -1):
        var = ENV_PREFIX + "__".join(str(p) for p in loc[:depth]).upper()
        if any(k.upper() == var for k in os.environ):
            return f"environment variable {var}"
    return str(path) if path else "defaults"


def load_settings(path: Path | str | None = None) -> Settings:
    """Read the YAML file (if any), apply the environment, validate everything at once."""
    file = Path(path) if path is not None else Path(os.environ.get("MNEMOBUS_CONFIG", DEFAULT_CONFIG))
    data: dict[str, Any] = {}
    if file.exists():
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: not valid YAML: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file}: the top level must be a mapping, got {type(loaded).__name__}")
        data = loaded
    elif path is not None:
        raise ConfigError(f"{file}: config file not found")
    try:
        return Settings(**data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            got = err.get("input")
            shown = "" if isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"{_origin(loc, file if file.exists() else None)}: field '{_describe(loc)}': {err['msg']}{shown}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from exc
