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
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from mnemobus.shared.errors import ConfigError
from mnemobus.shared.redact import is_secret_field, mask_urls

ENV_PREFIX = "MNEMOBUS_"
DEFAULT_CONFIG = Path("workspace/mnemobus.yaml")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


DAY_S = 24 * 3600


class StreamSettings(Section):
    """How JetStream keeps episodes and dead letters; docs/cluster.md explains each default."""

    replicas: int = Field(default=1, ge=1, le=5, description="copies of each stream, consumer and the heartbeat "
                          "bucket on a JetStream cluster: 3 keeps every acknowledged episode through the loss of "
                          "one server of three; the embedded single server holds 1")
    retention: Literal["limits", "workqueue"] = Field(
        default="limits", description="episodes: limits keeps them for episode_max_age_s after they are stored "
        "(replayable, e.g. into a new store); workqueue deletes each once the worker acknowledged it")
    episode_max_age_s: float = Field(default=7 * DAY_S, gt=0, description="how long an episode waits for a worker "
                                     "(a worker outage longer than this loses episodes)")
    dlq_max_age_s: float = Field(default=30 * DAY_S, gt=0, description="how long dead letters wait for "
                                 "`mnemobus dlq replay`")
    duplicate_window_s: float = Field(default=DAY_S, gt=0, description="a republished episode (same id) within "
                                      "this window is dropped by the server; after it the store's id check still "
                                      "keeps it from being stored twice")

    @model_validator(mode="after")
    def _window_within_age(self) -> StreamSettings:
        if self.duplicate_window_s > self.episode_max_age_s:
            raise ValueError(f"duplicate_window_s ({self.duplicate_window_s:g}) may not exceed episode_max_age_s "
                             f"({self.episode_max_age_s:g}): the server refuses such a stream")
        return self


class NatsSettings(Section):
    url: str | None = Field(default=None, description="nats:// URL, or a comma-separated list of a cluster's "
                            "servers; empty starts an embedded nats-server")
    data_dir: Path = Path("data/nats")
    connect_timeout_s: float = Field(default=2.0, gt=0)
    request_timeout_s: float = Field(default=2.0, gt=0)
    max_message_bytes: int = Field(default=256 * 1024, gt=1024, description="larger messages are dead-lettered")
    ping_interval_s: float = Field(default=5.0, gt=0, description="how often a client pings its server; after "
                                   "max_outstanding_pings unanswered it reconnects to another (a frozen or cut-off "
                                   "server is left within about ping_interval_s x (max_outstanding_pings + 1))")
    max_outstanding_pings: int = Field(default=2, ge=1)
    user: str | None = Field(default=None, description="the NATS user this process connects as (a role of "
                             "`mnemobus nats-users`: plugin, worker, api, worldstate, operator)")
    password: SecretStr | None = Field(default=None, description="its password; set it from the environment "
                                       "(MNEMOBUS_NATS__PASSWORD), never in the file")
    permissions_enforced: bool = Field(default=False, description="the server gives each role only its own "
                                       "subjects (`mnemobus nats-users`), so the identity a request claims comes "
                                       "from a publisher trusted to claim it; leave false on an open bus")
    streams: StreamSettings = Field(default_factory=StreamSettings)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        urls = [u.strip() for u in v.split(",")]
        for u in urls:
            if not u.startswith(("nats://", "tls://", "ws://", "wss://")):
                raise ValueError(f"{u!r}: each server must start with nats://, tls://, ws:// or wss://")
        return ",".join(urls)

    @property
    def servers(self) -> list[str]:
        """The configured servers (a cluster's URL list), [] when an embedded server is started."""
        return self.url.split(",") if self.url else []

    @model_validator(mode="after")
    def _user_and_password_together(self) -> NatsSettings:
        if (self.user is None) != (self.password is None):
            raise ValueError("user and password go together: set both (the password from the environment) or neither")
        return self

    @model_validator(mode="after")
    def _replicas_need_a_cluster(self) -> NatsSettings:
        if self.url is None and self.streams.replicas > 1:
            raise ValueError(f"streams.replicas is {self.streams.replicas} but no url is set: the embedded "
                             "nats-server is one server and holds 1 replica (set url to a cluster's servers)")
        return self


class Neo4jSettings(Section):
    uri: str = "bolt://127.0.0.1:7687"
    user: str | None = None
    password: SecretStr | None = None
    database: str | None = None
    erasure_lease_s: float = Field(default=45.0, ge=5, le=3600, description="a journalled erasure (too large for one "
                                   "transaction) stays the process's that started it this long after each batch; "
                                   "another process finishes it only once this runs out (its owner died or failed)")


class StoreSettings(Section):
    backend: str = Field(default="sqlite", description="a registered store (mnemobus_stores hook): sqlite, neo4j, "
                         "or one an installed package adds")
    sqlite_path: Path = Path("data/mnemobus.sqlite3")
    vector_cache_mb: int = Field(default=512, ge=16, description="per process, both backends: each group's "
                                 "vectors and graph kept in memory, least recently used groups evicted (SQLite: the "
                                 "graphs get a quarter of this on top); 1M facts with their entities need ~1.8 GB "
                                 "of vectors to stay warm")
    sqlite_reads_on_loop: bool = Field(default=True, description="SQLite: a recall whose groups are loaded reads "
                                       "on the event loop, not a worker thread (~0.5 ms less CPU an enriched "
                                       "request); one that would wait (a group not loaded yet, a busy file) still "
                                       "goes to a thread. false: always a thread")
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)


class EndpointSettings(Section):
    """What every OpenAI-compatible endpoint needs: where, who, and how long to wait."""

    base_url: str = Field(default="http://127.0.0.1:8080/v1", description="up to and including /v1")
    model: str = Field(default="", description="the model name the endpoint expects")
    api_key: SecretStr | None = Field(default=None, description="set it from the environment, never in the file")
    api_key_env: str | None = Field(default=None, description="or name the environment variable holding the key "
                                    "(e.g. OPENAI_API_KEY); checked at start")
    timeout_s: float = Field(default=60.0, gt=0, description="the whole of one HTTP call")
    connect_timeout_s: float = Field(default=5.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10, description="on 429, 5xx, timeouts and transport errors")
    backoff_base_s: float = Field(default=0.5, gt=0, description="first retry after ~this, doubling, jittered")
    backoff_max_s: float = Field(default=8.0, gt=0, description="longest wait between attempts; a Retry-After "
                                 "longer than this gives up at once")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        v = v.strip()
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v

    def resolved_api_key(self) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def check_ready(self, section: str) -> None:
        """For an endpoint that will be used: a model and, when a key variable is named, the variable."""
        if not self.model.strip():
            raise ValueError(f"{section}.model must name the endpoint's model")
        if self.api_key is None and self.api_key_env and not os.environ.get(self.api_key_env):
            raise ValueError(f"{section}.api_key_env names {self.api_key_env}, which is not set in the environment")


class OpenAIEmbeddingSettings(EndpointSettings):
    dim: int = Field(default=384, gt=0, le=8192, description="the model's vector size; every answer is checked "
                     "against it (the store is built for it)")
    timeout_s: float = Field(default=30.0, gt=0)


class EmbeddingSettings(Section):
    provider: str = Field(
        default="static", description="local: the ONNX transformer; static: a token table distilled from it "
        "(~1000x faster, somewhat less precise); hash: deterministic, for tests; openai: any OpenAI-compatible "
        "/embeddings endpoint (memory.embedding.openai); or one an installed package registers (mnemobus_embedders hook)")
    model: str = "all-MiniLM-L6-v2-int8"
    cache_dir: Path = Field(default=Path("data/embeddings"), description="where the static table is cached")
    batch_size: int = Field(default=64, gt=0, description="texts per call to an openai endpoint")
    openai: OpenAIEmbeddingSettings = Field(default_factory=OpenAIEmbeddingSettings)

    @model_validator(mode="after")
    def _openai_ready(self) -> EmbeddingSettings:
        if self.provider == "openai":
            self.openai.check_ready("memory.embedding.openai")
        return self


class RecallTuning(Section):
    """How recall weighs what it finds, for every recipe (recipes differ only in the methods they run).

    Only the keys set here override the recipes' own values (mnemobus/engine/recipes.py, the one place
    defaults live); the README's Recall quality says how the defaults were chosen."""

    rrf_k: float | None = Field(default=None, gt=0, description="reciprocal rank fusion constant: smaller favours top ranks")
    text_weight: float | None = Field(default=None, ge=0, description="weight of full-text (BM25) rankings")
    vector_weight: float | None = Field(default=None, ge=0, description="weight of embedding rankings")
    graph_weight: float | None = Field(default=None, ge=0, description="weight of the facts the walk from matched "
                                       "entities reaches, and of graph recall's facts")
    walk: bool | None = Field(default=None, description="the walk from the entities the query names as one more "
                              "fact ranking (off in hybrid, on in the graph recipe; README, Recall quality)")
    candidates: int | None = Field(default=None, ge=1, le=500, description="candidates per method and group")
    decay_rate: float | None = Field(default=None, ge=0, description="per day since a fact was last observed")
    age_floor: float | None = Field(default=None, ge=0, le=1, description="least share of its score age leaves a fact")
    message_weight: float | None = Field(default=None, ge=0, description="a source message's score beside a "
                                         "fact's in the one ranking")
    context_before: float | None = Field(default=None, ge=0, le=1, description="score a recalled message lends the "
                                         "turn said before it, per step away (0: off)")
    context_after: float | None = Field(default=None, ge=0, le=1, description="score a recalled message lends the "
                                        "turn said after it, per step away (0: off)")
    context_span: int | None = Field(default=None, ge=0, le=5, description="turns each side of a recalled message")
    context_within_s: float | None = Field(default=None, gt=0, description="a turn further than this many seconds "
                                           "from the recalled message is another conversation")
    forget_after_days: float | None = Field(default=None, gt=0, description="explicit forgetting: facts not observed "
                                            "this many days are not recalled (still stored); off unless set")
    retrieval_boost: float | None = Field(default=None, ge=0, le=1, description="weight of ln(1 + times recalled)")
    graph: Literal["off", "bfs", "activation", "ppr", "ppr_turns"] | None = Field(
        default=None, description="graph recall: turns and facts reached from the query's entities over the "
        "mention and fact graph (off, bfs, activation: spreading activation, ppr: personalized PageRank, ppr_turns: "
        "HippoRAG's PageRank over turns and entities, turns scored by their mass)")
    graph_episode_weight: float | None = Field(default=None, ge=0, description="weight of the turns graph recall "
                                               "reaches (its facts take graph_weight)")
    graph_episode_slots: int | None = Field(default=None, ge=0, le=10, description="of the turns shown, this many "
                                            "kept for the best turns graph recall reached that fusion left out")
    graph_hops: int | None = Field(default=None, ge=1, le=2, description="1: the query entities' own links; 2: also "
                                   "those of the entities one fact away")
    graph_per_entity: int | None = Field(default=None, ge=1, le=200, description="links read per entity")
    graph_decay: float | None = Field(default=None, gt=0, le=1, description="activation kept per hop")
    graph_inhibition: float | None = Field(default=None, ge=0, le=1, description="lateral inhibition among the "
                                           "strongest nodes")
    graph_threshold: float | None = Field(default=None, ge=0, lt=1, description="activation below this share of "
                                          "the strongest is dropped")
    graph_node_cap: int | None = Field(default=None, ge=1, le=500, description="entities carried to the second hop, "
                                       "and turns and facts kept")
    graph_ppr_alpha: float | None = Field(default=None, gt=0, lt=1, description="personalized PageRank: restart "
                                          "probability per step")
    graph_time_budget_ms: float | None = Field(default=None, ge=0, description="no second hop once the first has "
                                               "taken this long")
    graph_seeds_per_community: int | None = Field(default=None, ge=0, le=50, description="at most this many of "
                                                  "the graph's seed entities from one community (0: no cap)")
    communities: Literal["off", "on"] | None = Field(
        default=None, description="community summaries as a recall signal: the facts of the communities whose "
        "summaries are nearest the query join the ranking (off by default; README, Recall quality)")
    community_weight: float | None = Field(default=None, ge=0, description="weight of the matched communities' facts")
    min_community_similarity: float | None = Field(default=None, ge=-1, le=1, description="a summary further than "
                                                   "this from the query matches nothing")


class MemorySettings(Section):
    recall_deadline_ms: float = Field(default=150, gt=0)
    max_items: int = Field(default=10, ge=1, le=100, description="facts and messages in the context block, "
                           "in one ranking (the budget in characters may cut it shorter)")
    max_facts: int = Field(default=10, ge=0, le=100, description="at most this many of them facts")
    max_episodes: int = Field(default=10, ge=0, le=100, description="at most this many of them source messages")
    context_budget_chars: int = Field(default=2000, ge=200)
    executor_timeout_s: float = Field(default=30.0, gt=0)
    memory_in_broadcast: bool = Field(default=False, description="the copy of each answer on "
                                      "agent.skill.response.<agent> keeps the recalled memory block and groups; off, "
                                      "only the requester's reply carries them (anyone subscribed to the broadcast "
                                      "would read every user's memory)")
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
    warm_groups_prefix: str = Field(default="", description="load only groups whose id starts with this ('': "
                                    "any): a process that serves part of a store shared with others")
    recall_time_share: float = Field(
        default=0.6, ge=0, description="seconds of recall per second each plugin process may spend (summed over "
        "the recalls it runs at once); past it a recall while another request is in the process is skipped "
        "(status overloaded) until time accrues again (one alone always runs: it delays no one), so an overload leaves "
        "the CPU to relaying rather than starving nats-server and the executors (0: no limit)")
    shed_loop_lag_ms: float = Field(
        default=50, ge=0, description="skip recall (status overloaded) while the plugin's event loop runs this far "
        "behind, or for a request that waited this long for its turn: the process is out of CPU, and relaying "
        "unenriched keeps every request prompt (0: never)")
    outbox_path: Path = Field(default=Path("data/outbox.sqlite3"),
                              description="episodes the stream refused wait here until it takes them")
    form_cold_after_s: float = Field(default=600, gt=0, description="flush a buffered session idle this long")
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    recall: RecallTuning = Field(default_factory=RecallTuning)


class WorkerSettings(Section):
    batch: int = Field(default=32, ge=1, le=1000, description="episodes fetched and ingested as one engine batch")
    batches_in_flight: int = Field(default=2, ge=1, le=8, description="fetched batches worked on at once: the "
                                   "next is extracted while the store commits the last (the store still commits "
                                   "one at a time)")
    max_deliver: int = Field(default=6, ge=2)
    backoff_s: list[float] = Field(default_factory=lambda: [0.5, 1, 2, 4, 8])
    ack_wait_s: float = Field(default=30, gt=0)
    heartbeat_s: float = Field(default=5, gt=0)
    idle_fetch_s: float = Field(default=1.0, gt=0, le=3600, description="how long one fetch waits for episodes "
                                "before asking again (a stop ends the wait at once)")

    @field_validator("backoff_s")
    @classmethod
    def _backoff(cls, v: list[float]) -> list[float]:
        if not v or any(x <= 0 for x in v):
            raise ValueError("must be a non-empty list of positive seconds")
        return v


class LlmSettings(EndpointSettings):
    structured_output: Literal["json_schema", "json_object_schema", "json_object"] = Field(
        default="json_schema", description="json_schema: OpenAI, vLLM, Ollama; json_object_schema: llama.cpp "
        "servers (they answer 500 to json_schema); json_object: plain JSON mode, schema in the prompt")
    concurrency: int = Field(default=2, ge=1, le=256, description="chat calls in flight per worker process")
    tokens_per_hour: int = Field(default=1_000_000, ge=0, description="rolling budget of prompt+completion "
                                 "tokens; past it episodes go to the offline extractor (0: no budget)")
    max_tokens: int = Field(default=1024, ge=16, le=32768, description="completion tokens per call; keep it above "
                            "the longest answer max_entities and max_facts allow (~900 at the defaults; a warning "
                            "at start says when it is not), or a model that fills them is cut off")
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_entities: int = Field(default=6, ge=1, le=32, description="entities one answer may hold (schema maxItems)")
    max_facts: int = Field(default=6, ge=1, le=32, description="facts one answer may hold (schema maxItems)")
    max_candidate_entities: int = Field(default=8, ge=0, le=50, description="known entities shown to the model "
                                        "for same-as judgements (0: none, and no candidate facts either)")
    max_candidate_facts: int = Field(default=12, ge=0, le=100, description="current facts of those entities "
                                     "shown for duplicate/contradicts judgements")
    max_message_chars: int = Field(default=4000, ge=100, description="longer messages are cut for the prompt")


class ExtractionSettings(Section):
    extractor: str = Field(
        default="offline", description="offline: rules, no network; llm: one call per episode to extraction.llm, "
        "falling back to offline per episode; or one an installed package registers (mnemobus_extractors hook)")
    llm: LlmSettings = Field(default_factory=LlmSettings)
    relation_threshold: float | None = Field(
        default=0.70, gt=0, le=1, description="a relation no table row names is read as the row nearest in meaning "
        "(local sentence model) when the similarity reaches this; null turns the semantic fallback off")
    parse_child: bool | Literal["auto"] = Field(
        default="auto", description="the offline parser on a second core: a batch of 16 or more episodes in two "
        "groups or more is parsed in chunks of whole groups, most in a child process while this one stores the "
        "chunk before (engine/parse_process.py; ~300 MB more, started on the first such batch). Less CPU on the "
        "busier process, ~20% more in all: for a machine with a core to spare, not one whose cores are busy. auto "
        "(the default): each such batch uses the child only while ~0.6 of a core is free for it (idle or its own) "
        "(engine/spare_core.py), so it does not lose where the cores are busy; never with the local embedder "
        "(memory.embedding.provider: local), whose batch embedded per chunk lost ~30% in bench-engine, nor in the "
        "worker, whose overlapping batches (worker.batches_in_flight) already use a second core: so it serves the "
        "batch door (mnemobus import, the graph backfill); true: always; false: never")

    @model_validator(mode="after")
    def _llm_ready(self) -> ExtractionSettings:
        if self.extractor == "llm":
            self.llm.check_ready("extraction.llm")
        return self


class IdentitySettings(Section):
    users_file: Path = Path("workspace/users.yaml")
    reload_interval_s: float = Field(default=2.0, gt=0)


class MetricsSettings(Section):
    port: int = Field(default=9464, ge=0, le=65535, description="0 disables the /metrics listener")
    host: str = "127.0.0.1"


def long_secret(value: SecretStr, what: str) -> SecretStr:
    """A secret a caller presents must not be guessable: at least 16 characters."""
    if len(value.get_secret_value()) < 16:
        raise ValueError(f"{what} must have at least 16 characters")
    return value


class ApiKey(Section):
    """One person's key to the memory API: a request carrying it acts as `owner`."""

    owner: str = Field(min_length=1, max_length=64, description="the users.yaml id of whoever holds the key: the "
                       "actor of the admin actions it makes (delete-user, /memory clear) and the name in their audit")
    key: SecretStr = Field(description="at least 16 characters; from the environment or a secrets file")

    @field_validator("key")
    @classmethod
    def _long_enough(cls, v: SecretStr) -> SecretStr:
        return long_secret(v, "a key")


class ApiSettings(Section):
    """The `api` section: where the memory service listens and what it asks of callers."""

    http: bool = Field(default=True, description="serve the Graphiti-compatible HTTP API (NATS endpoints always run)")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535, description="0 binds a free port (tests); the bound URL is logged")
    api_key: SecretStr | None = Field(default=None, description="when set, HTTP and NATS requests must carry it "
                                      "(or one of `keys`); it proves no one, so no admin action is made with it")
    keys: list[ApiKey] = Field(default_factory=list, description="per-person keys (`owner`, `key`): when any is set "
                               "(or api_key), every request must carry one, and an admin action acts as its owner")
    max_inflight: int = Field(default=64, ge=1, le=10_000, description="concurrent NATS requests per endpoint")
    drain_timeout_s: float = Field(default=10.0, gt=0, description="how long in-flight requests may finish at stop")
    search_timeout_s: float = Field(default=5.0, gt=0, description="a search or get-memory past this answers 504")

    @model_validator(mode="after")
    def _keys_unique(self) -> ApiSettings:
        given = [k.key.get_secret_value() for k in self.keys]
        if self.api_key is not None:
            given.append(self.api_key.get_secret_value())
        if len(set(given)) < len(given):
            raise ValueError("two API keys are the same: each key must name one owner")
        return self


class McpClient(Section):
    """One MCP client allowed over streamable HTTP: it sends `Authorization: Bearer <token>`."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    token: SecretStr = Field(description="at least 16 characters; from the environment or a secrets file")
    admin: bool = Field(default=False, description="may clear a group")
    user: str | None = Field(default=None, min_length=1, max_length=64, description="the users.yaml user this token "
                             "acts as (a non-admin token promotes into that user's memory only; without one it "
                             "promotes nowhere)")

    @field_validator("token")
    @classmethod
    def _long_enough(cls, v: SecretStr) -> SecretStr:
        return long_secret(v, "a token")


class McpSettings(Section):
    """The `mcp` section: the Model Context Protocol door (`mnemobus run --role mcp`, `mnemobus mcp`)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535, description="streamable HTTP; 0 binds a free port (tests)")
    path: str = Field(default="/mcp", pattern=r"^/[A-Za-z0-9_/-]*$")
    clients: list[McpClient] = Field(default_factory=list, description="per-client tokens; `api.api_key` is an "
                                     "admin token too. Over HTTP a call without one of them is refused")
    stdio_admin: bool = Field(default=True, description="`mnemobus mcp` (stdio) runs as the local user, who "
                              "can read the store anyway: admin unless this is false")


class RetentionSettings(Section):
    """What a group sheds once it has outlived its use (issue 39); a rule set to null is off."""

    ended_days: float | None = Field(default=365, gt=0, description="evict facts that ended longer ago than this")
    orphan_days: float | None = Field(default=90, gt=0, description="evict entities with no active fact that were "
                                      "not seen for this long")
    entity_cap: int | None = Field(default=None, ge=1, description="at most this many entities per group; the least "
                                   "connected (then least recently seen) go first, with their facts")
    interval_s: float = Field(default=3600, gt=0, description="how often each worker evicts, every group")
    scheduled: bool = Field(default=True, description="the worker evicts on its schedule (off: only on demand)")
    groups_prefix: str = Field(default="", description="the scheduled pass evicts only groups whose id starts with "
                               "this ('': every group); a store shared with others, or a test on the run's Neo4j")


class DecaySettings(Section):
    """Retrieval counts (and the confidence of facts not observed again) fade on a schedule; observing a fact
    again restores its confidence."""

    factor: float = Field(default=0.9, gt=0, le=1, description="multiplier applied each interval (1: no decay)")
    interval_s: float = Field(default=86400, gt=0, description="how often a group decays (once per interval, "
                              "however many workers run)")
    min_confidence: float = Field(default=0.2, ge=0, le=1, description="confidence never decays below this")
    scheduled: bool = Field(default=True, description="the worker decays on its schedule")
    groups_prefix: str = Field(default="", description="the scheduled pass decays only groups whose id starts with "
                               "this ('': every group)")


class PromotionSettings(Section):
    """Promoted memories in recall: a reserved part of the context block, listed first."""

    budget_share: float = Field(default=0.3, gt=0, le=1, description="share of memory.context_budget_chars "
                                "reserved for promoted memories")
    max_items: int = Field(default=5, ge=1, le=50, description="promoted memories shown in one context block")
    max_chars: int = Field(default=1000, ge=1, le=10_000, description="the longest text one promoted memory may have")


class CommunitiesSettings(Section):
    """Community upkeep (issue 39): when a group's communities are refreshed, how far one refresh may go, and
    how summaries are made (docs/communities.md)."""

    refresh_every_episodes: int = Field(default=50, ge=0, description="a full refresh of a group after this many "
                                        "of its episodes are stored (0: only on demand, `mnemobus graph refresh`)")
    chunk_size: int = Field(default=5000, ge=10, le=100_000, description="active facts read per query")
    time_budget_s: float = Field(default=10.0, gt=0, le=3600, description="one refresh slice; a refresh that runs "
                                 "out resumes at the group's next trigger")
    max_iterations: int = Field(default=20, ge=1, le=1000, description="label propagation passes at most")
    summary_members: int = Field(default=5, ge=1, le=50, description="central members a summary names")
    summary_facts: int = Field(default=5, ge=0, le=50, description="central facts a summary states")
    summary_concurrency: int = Field(default=2, ge=1, le=32, description="summaries (LLM calls) in flight")
    summary_prompt_chars: int = Field(default=2000, ge=200, le=100_000, description="with extractor: llm, the "
                                      "longest prompt one summary call sends (facts past it are left out)")
    vote: bool = Field(default=True, description="between refreshes, a new entity joins its neighbours' "
                       "majority community")
    propagation: Literal["process", "thread"] = Field(default="process", description="where label propagation "
                                                     "runs: a child process (off the GIL, so recall beside a refresh "
                                                     "keeps its pace) or a thread of the worker")
    write_chunk: int = Field(default=200, ge=1, le=10_000, description="communities written (or dropped) per store "
                             "transaction; the worker's other tasks (recall) run between two")
    child_nice: int = Field(default=10, ge=0, le=19, description="niceness of the propagation child process: "
                            "with fewer free cores than busy processes, recall is scheduled before it")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", case_sensitive=False
    )

    nats: NatsSettings = Field(default_factory=NatsSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    identity: IdentitySettings = Field(default_factory=IdentitySettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    decay: DecaySettings = Field(default_factory=DecaySettings)
    promotion: PromotionSettings = Field(default_factory=PromotionSettings)
    communities: CommunitiesSettings = Field(default_factory=CommunitiesSettings)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    event_loop: Literal["uvloop", "asyncio"] = Field(default="uvloop", description="the event loop every "
                                                     "command runs on: uvloop (libuv, less CPU a request) or "
                                                     "asyncio's own; uvloop falls back to asyncio where it "
                                                     "is not installed")

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


def _unknown_sections_in_environment() -> list[str]:
    """`MNEMOBUS_<SECTION>__<KEY>` variables whose section does not exist: pydantic-settings ignores them, so a
    typo (`MNEMOBUS_METRIC__HOST`) would leave the setting at its default without a word."""
    sections = set(Settings.model_fields)
    return sorted(k for k in os.environ if k.upper().startswith(ENV_PREFIX) and "__" in k[len(ENV_PREFIX):]
                  and k[len(ENV_PREFIX):].split("__", 1)[0].lower() not in sections)


def config_file(path: Path | str | None = None) -> Path:
    """The file `load_settings(path)` reads: `path`, else $MNEMOBUS_CONFIG, else workspace/mnemobus.yaml."""
    return Path(path) if path is not None else Path(os.environ.get("MNEMOBUS_CONFIG", DEFAULT_CONFIG))


def field_origin(loc: tuple[Any, ...], path: Path | str | None = None) -> str:
    """Where a field's value came from: the environment variable that set it, else the file, else defaults."""
    file = config_file(path)
    return _origin(loc, file if file.exists() else None)


def load_settings(path: Path | str | None = None) -> Settings:
    """Read the YAML file (if any), apply the environment, validate everything at once."""
    file = config_file(path)
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
    unknown = _unknown_sections_in_environment()
    if unknown:
        raise ConfigError(f"invalid configuration:\n  environment variable {unknown[0]}: no section "
                          f"'{unknown[0][len(ENV_PREFIX):].split('__', 1)[0].lower()}' (sections: "
                          f"{', '.join(Settings.model_fields)})")
    try:
        return Settings(**data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            got = err.get("input")
            # a secret's value is never shown back, nor a URL's password (issue 41: a short MCP token was echoed)
            shown = "" if isinstance(got, (dict, list)) or is_secret_field(loc) else f" (got {got!r})"
            lines.append(mask_urls(f"{_origin(loc, file if file.exists() else None)}: field '{_describe(loc)}': "
                                   f"{err['msg']}{shown}"))
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from exc
