"""The pipeline's own Prometheus series, on a registry the caller passes in.

Tests build their own registry and read exactly what their code did; the
process exports one registry on the metrics port. No series carries a user
or group id: cardinality stays bounded whatever the traffic.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class PipelineMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.bus_errors = Counter(
            "mnemobus_bus_errors_total", "Errors the NATS server or client reported on this process's connection, "
            "by kind (permissions_violation: a role published or subscribed outside its permissions)", ["kind"],
            registry=r)
        self.messages = Counter(
            "mnemobus_messages_total", "Messages handled per endpoint and outcome (ok, invalid, error; abandoned: "
            "taken off the bus, and the endpoint cancelled before its handler returned)",
            ["endpoint", "outcome"], registry=r)
        self.handler_seconds = Histogram(
            "mnemobus_handler_duration_seconds", "Handler time per endpoint", ["endpoint"],
            buckets=_LATENCY_BUCKETS, registry=r)
        self.store_check_unread = Counter(
            "mnemobus_store_check_unread_total", "Starts on a bus this process did not start whose check of the "
            "workers' store could not read their heartbeats (kernel/peers.py): it started without comparing",
            registry=r)
        self.queued_seconds = Histogram(
            "mnemobus_handler_queued_seconds", "Time a message waited in the process for its handler to start, per "
            "endpoint: the process behind its load", ["endpoint"], buckets=_LATENCY_BUCKETS, registry=r)
        self.dead_letters = Counter(
            "mnemobus_dead_letters_total", "Messages dead-lettered, by reason", ["reason"], registry=r)
        self.dead_letter_errors = Counter(
            "mnemobus_dead_letter_errors_total", "Dead letters the stream would not take, by reason: a worker leaves "
            "the episode for redelivery, a core-NATS endpoint (the plugin's requests) loses the message", ["reason"],
            registry=r)
        self.requests = Counter(
            "mnemobus_requests_total", "Skill requests by enrichment status "
            "(enriched, empty, skipped, disabled, timeout, error)", ["status"], registry=r)
        self.recall_seconds = Histogram(
            "mnemobus_recall_duration_seconds", "Recall latency on the request path",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.fail_open = Counter(
            "mnemobus_recall_fail_open_total", "Requests forwarded unenriched because recall failed",
            ["reason"], registry=r)
        self.executor_errors = Counter(
            "mnemobus_executor_errors_total", "Executor calls that failed (timeout, no_responders, error)",
            ["kind"], registry=r)
        self.reply_errors = Counter(
            "mnemobus_reply_errors_total", "Answers the plugin could not publish on a reply subject", registry=r)
        self.episodes_emitted = Counter(
            "mnemobus_episodes_emitted_total", "Episodes published to the episode stream", registry=r)
        self.episodes_not_formed = Counter(
            "mnemobus_episodes_not_formed_total", "Exchanges answered but kept out of memory, by reason "
            "(blank_content)", ["reason"], registry=r)
        self.episode_emit_errors = Counter(
            "mnemobus_episode_emit_errors_total", "Episodes the stream refused (parked in the outbox)", registry=r)
        self.outbox_retry_errors = Counter(
            "mnemobus_episode_outbox_retry_errors_total", "Republishing a parked episode failed (the stream is still "
            "away; it stays parked)", registry=r)
        self.outbox_depth = Gauge(
            "mnemobus_episode_outbox_depth", "Episodes parked on local disk until the stream takes them", registry=r)
        self.episodes_stored = Counter(
            "mnemobus_episodes_stored_total", "Episodes committed by the worker (created=false: replay)",
            ["created"], registry=r)
        self.episodes_dead_lettered = Counter(
            "mnemobus_episodes_dead_lettered_total", "Episodes moved to the DLQ", ["reason"], registry=r)
        self.worker_retries = Counter(
            "mnemobus_worker_retries_total", "Episodes nak'ed for a later retry", ["reason"], registry=r)
        self.worker_fetch_errors = Counter(
            "mnemobus_worker_fetch_errors_total", "Episode fetches that failed (bus away, stream or consumer "
            "missing), by error kind", ["kind"], registry=r)
        self.worker_store_waits = Counter(
            "mnemobus_worker_store_waits_total", "Store outages, and other writers' locks on the store, "
            "the worker waited out holding its batch (no delivery attempt spent)", registry=r)
        self.worker_store_wait_seconds = Counter(
            "mnemobus_worker_store_wait_seconds_total", "Seconds the worker held a batch waiting for the store, "
            "counted while the hold lasts",
            registry=r)
        self.worker_in_progress_errors = Counter(
            "mnemobus_worker_in_progress_errors_total", "Long batches whose in-progress mark failed (they may be "
            "redelivered, then found already stored)", registry=r)
        self.worker_settle_errors = Counter(
            "mnemobus_worker_settle_errors_total", "Acks, naks and dead-letterings the bus did not confirm (the "
            "message comes back after ack_wait and is found stored), by error kind; unexpected: any other failure "
            "settling an episode", ["kind"], registry=r)
        self.worker_heartbeat_errors = Counter(
            "mnemobus_worker_heartbeat_errors_total", "Heartbeats the worker could not write (bus away)", registry=r)
        self.worker_protocol_errors = Counter(
            "mnemobus_worker_protocol_errors_total", "Messages on the worker's fetch inbox that are no delivery of its "
            "consumer (someone named that inbox as a reply subject, or a bad status), dropped unsettled", ["kind"],
            registry=r)
        self.worker_restarts = Counter(
            "mnemobus_worker_restarts_total", "Consumer loops restarted by the supervisor", registry=r)
        self.worker_slow_batches = Counter(
            "mnemobus_worker_slow_batches_total", "Batches whose storing took longer than ack_wait (kept in progress "
            "meanwhile): a store answering slowly, e.g. a Neo4j just started, planning every query afresh", registry=r)
        self.worker_fetch_surplus = Counter(
            "mnemobus_worker_fetch_surplus_total", "Deliveries a fetch brought beyond worker.batch (the client hands "
            "over every delivery already waiting in its inbox), by fate: kept for the next fetch, given back at stop "
            "(nak'd, redelivered at once), or give_back_failed (redelivered after ack_wait)", ["fate"], registry=r)
        self.worker_lag = Gauge(
            "mnemobus_worker_pending_episodes", "Episodes waiting for the worker (consumer pending)", registry=r)
        self.store_seconds = Histogram(
            "mnemobus_store_operation_duration_seconds", "Store operations as seen by the worker and recall",
            ["operation"], buckets=_LATENCY_BUCKETS, registry=r)
        self.index_warms = Counter(
            "mnemobus_recall_index_warms_total", "Start-up loads of recently active groups' recall indexes (ok, failed)",
            ["outcome"], registry=r)
        self.warmed_groups = Gauge(
            "mnemobus_recall_warmed_groups", "Groups whose recall indexes the last start-up load brought in", registry=r)
        self.graph_hops_skipped = Counter(
            "mnemobus_recall_graph_hops_skipped_total", "Graph recalls whose second hop was skipped because the first "
            "took memory.recall.graph_time_budget_ms (what lies one fact away was not reached)", registry=r)
        self.parse_child_failures = Counter(
            "mnemobus_parse_child_failures_total", "Batches whose parse child (extraction.parse_child) died, answered "
            "out of step or ran out of time: the chunks it had not answered failed and are redelivered", registry=r)
        self.mcp_calls = Counter(
            "mnemobus_mcp_calls_total", "MCP tool calls by tool and outcome (ok, invalid, unauthorized, forbidden, "
            "error)", ["tool", "outcome"], registry=r,
        )
        self.http_errors = Counter(
            "mnemobus_http_errors_total", "HTTP requests that ended in an unexpected error (a 500), by exception kind",
            ["kind"], registry=r)
        self.extraction_facts = Histogram(
            "mnemobus_extraction_facts_per_episode", "Facts and endings the extractor found in one stored episode, "
            "by extractor", ["extractor"], buckets=(0, 1, 2, 3, 5, 8, 13, 21, 34), registry=r)
        self.extraction_empty = Counter(
            "mnemobus_extraction_empty_episodes_total", "Stored episodes the extractor found nothing in, by extractor "
            "(a graph that learns nothing shows here)", ["extractor"], registry=r)
        self.extraction_seconds = Histogram(
            "mnemobus_extraction_duration_seconds", "Extractor time per call (a worker batch), by extractor",
            ["extractor"], buckets=_LATENCY_BUCKETS, registry=r)
        self.episodes_erased = Counter(
            "mnemobus_worker_episodes_erased_total", "Episodes dropped at commit because their group was erased after "
            "their write started (store/erasures.py): acked, never stored, never dead-lettered", registry=r)
        self.erasures_refused = Counter(
            "mnemobus_erasures_refused_total", "DELETE /group, delete-group and POST /clear refused to a caller who "
            "may not erase (each also logged by mnemobus.audit), by operation", ["operation"], registry=r)
        self.identity_reloads = Counter(
            "mnemobus_identity_reloads_total", "users.yaml reloads (ok, rejected)", ["outcome"], registry=r)
        self.store_deadlocks = Counter(
            "mnemobus_store_deadlocks_total", "Write transactions the store (Neo4j) lost to another writer's "
            "deadlock, by outcome: replayed (run again and stored) or gave_up (the caller retries); and "
            "erased_meanwhile: tries that waited for a group's lock while an erasure of the group deleted it (run "
            "again)", ["outcome"],
            registry=r)
        self.vector_cache_crowded = Counter(
            "mnemobus_vector_cache_crowded_total", "Times a group's own vector matrix was evicted to make room for "
            "its own others (store.vector_cache_mb too small for one group: its recalls read the file again), by "
            "table", ["table"], registry=r)
        self.reads_off_loop = Counter(
            "mnemobus_store_reads_off_loop_total", "Recalls whose reads left the event loop for a worker thread "
            "(SQLite): cold (a group read for the first time), grown (many new rows to read first), busy (a lock or "
            "the file held by another); each costs a thread hop", ["reason"], registry=r)
        self.llm = LlmMetrics(r)
        self.lifecycle = LifecycleMetrics(r)
        self.communities = CommunityMetrics(r)


_CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)


class LlmMetrics:
    """The LLM extractor and the endpoint embedder: every call by outcome, every retry by reason, every episode the
    offline extractor took over by reason, so a dead, slow or over-budget model shows on a dashboard."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "mnemobus_llm_calls_total", "HTTP calls to the model endpoint by endpoint (chat, embeddings) and outcome "
            "(ok, rate_limited, server_error, client_error, timeout, transport, bad_response)",
            ["endpoint", "outcome"], registry=r)
        self.retries = Counter(
            "mnemobus_llm_retries_total", "Calls repeated after a failure, by endpoint and the failure's outcome",
            ["endpoint", "reason"], registry=r)
        self.call_seconds = Histogram(
            "mnemobus_llm_call_duration_seconds", "Time of one HTTP call to the model endpoint, by endpoint",
            ["endpoint"], buckets=_CALL_BUCKETS, registry=r)
        self.tokens = Counter(
            "mnemobus_llm_tokens_total", "Tokens the endpoint reported using, by kind (prompt, completion)",
            ["kind"], registry=r)
        self.answers = Counter(
            "mnemobus_llm_answers_total", "Structured answers by validation outcome (valid, invalid)",
            ["outcome"], registry=r)
        self.extractions = Counter(
            "mnemobus_llm_extractions_total", "Episodes extracted, by who did it (llm, offline_fallback)",
            ["extractor"], registry=r)
        self.fallbacks = Counter(
            "mnemobus_llm_fallbacks_total", "Episodes the offline extractor took over, by reason (budget, "
            "unavailable, timeout, refused, bad_response, invalid_answer)", ["reason"], registry=r)
        self.budget_remaining = Gauge(
            "mnemobus_llm_budget_remaining_tokens", "Tokens left in the rolling hourly budget (-1: no budget)",
            registry=r)
        self.in_flight = Gauge(
            "mnemobus_llm_calls_in_flight", "Chat calls running now (at most llm.concurrency)", registry=r)


class LifecycleMetrics:
    """A group's life-cycle (issue 39): what eviction removed, decay runs, promotions."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.evicted = Counter(
            "mnemobus_evicted_total", "Rows eviction removed, by kind (fact, entity) and trigger (schedule, demand)",
            ["kind", "trigger"], registry=r)
        self.upkeep_runs = Counter(
            "mnemobus_upkeep_runs_total", "Scheduled upkeep passes over every group, by job (evict, decay) and "
            "outcome (ok, error)", ["job", "outcome"], registry=r)
        self.decayed = Counter(
            "mnemobus_decayed_facts_total", "Facts whose retrieval count or confidence a decay pass lowered",
            registry=r)
        self.promotions = Counter(
            "mnemobus_promotions_total", "Promote requests, by outcome (ok, refused)", ["outcome"], registry=r)


class CommunityMetrics:
    """Community upkeep (issue 39): refreshes by outcome, summaries made and skipped, votes, and how long a
    refresh took; an unchanged graph's refresh shows as summaries skipped and none made."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.refreshes = Counter(
            "mnemobus_community_refreshes_total", "Community refreshes by outcome (finished; sliced: the time bound "
            "ran out and the next refresh resumes it; cancelled; failed)", ["outcome"], registry=r)
        self.refresh_seconds = Histogram(
            "mnemobus_community_refresh_duration_seconds", "Time of one refresh slice, reading edges to writing",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=r)
        self.summaries = Counter(
            "mnemobus_community_summaries_total", "Community summaries by outcome (made; skipped: the community's "
            "fingerprint was unchanged, so no summary work)", ["outcome"], registry=r)
        self.summary_fallbacks = Counter(
            "mnemobus_community_summary_fallbacks_total", "LLM community summaries the offline one replaced, by "
            "reason", ["reason"], registry=r)
        self.votes = Counter(
            "mnemobus_community_votes_total", "New entities between refreshes by outcome (joined: its neighbours' "
            "majority community; none: no neighbour in a community)", ["outcome"], registry=r)
        self.last_refresh = Gauge(
            "mnemobus_community_last_refresh_timestamp_seconds", "When this process last finished a community "
            "refresh (0: never)", registry=r)
