"""The worker's community upkeep: a group's communities refreshed every N of its stored episodes, and the
entities a batch brought in placed by their neighbours' vote meanwhile.

Why a queue beside ingestion rather than work inside it: a refresh may take seconds on a large group, and
an episode is acked only once stored, so nothing of the refresh may sit on that path. Ingestion only counts
and enqueues; one upkeep task refreshes one group at a time, pausing between edge chunks while a batch is
being ingested (bounded, so a worker that is never idle still refreshes).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio

from mnemobus.shared.config import CommunitiesSettings, ExtractionSettings
from mnemobus.engine.communities import CommunityRefresher, RefreshOutcome, RefreshSettings
from mnemobus.engine.community_summary import OfflineSummariser, Summariser
from mnemobus.shared.groups import GroupId
from mnemobus.shared.metrics import CommunityMetrics, LlmMetrics
from mnemobus.store.communities import CommunityStore
from mnemobus.store.model import Episode

log = logging.getLogger("mnemobus.upkeep")

MAX_PAUSE_S = 2.0  # the longest a refresh waits for ingestion to go idle before reading its next chunk


def refresh_settings(cfg: CommunitiesSettings) -> RefreshSettings:
    return RefreshSettings(chunk_size=cfg.chunk_size, time_budget_s=cfg.time_budget_s,
                           max_iterations=cfg.max_iterations, summary_members=cfg.summary_members,
                           summary_facts=cfg.summary_facts, summary_concurrency=cfg.summary_concurrency,
                           propagation=cfg.propagation, write_chunk=cfg.write_chunk, child_nice=cfg.child_nice)


def build_summariser(cfg: CommunitiesSettings, extraction: ExtractionSettings, llm_metrics: LlmMetrics,
                     metrics: CommunityMetrics) -> Summariser:
    """Offline, or with `extractor: llm` one call per changed community on the extraction endpoint."""
    if extraction.extractor != "llm":
        return OfflineSummariser()
    from mnemobus.engine.llm.community_summary import LlmSummariser
    from mnemobus.engine.llm import chat_client

    client = chat_client(extraction.llm, llm_metrics, cfg.summary_concurrency)
    return LlmSummariser(client, structured_output=extraction.llm.structured_output, max_prompt_chars=cfg.summary_prompt_chars,
                         on_fallback=lambda reason: metrics.summary_fallbacks.labels(reason=reason).inc())


def make_refresher(engine: Any, cfg: CommunitiesSettings, extraction: ExtractionSettings, llm_metrics: LlmMetrics,
                   metrics: CommunityMetrics, **kw: Any) -> CommunityRefresher | None:
    """A refresher on the engine's store and embedder; None when the store keeps no communities."""
    if not isinstance(getattr(engine, "store", None), CommunityStore):
        return None
    return CommunityRefresher(engine.store, engine.embedder, settings=refresh_settings(cfg),
                              summariser=build_summariser(cfg, extraction, llm_metrics, metrics), metrics=metrics, **kw)


class CommunityUpkeep:
    def __init__(self, engine: Any, cfg: CommunitiesSettings, extraction: ExtractionSettings,
                 llm_metrics: LlmMetrics, metrics: CommunityMetrics) -> None:
        self.cfg = cfg
        self.refresher = make_refresher(engine, cfg, extraction, llm_metrics, metrics, pause=self._ingestion_idle)
        self.since_refresh: dict[GroupId, int] = {}
        self.outcomes: list[RefreshOutcome] = []  # finished or sliced refreshes, oldest first (the last 100)
        self._due: dict[GroupId, None] = {}  # ordered set
        self._votes: list[tuple[GroupId, list[str]]] = []
        self._wake = anyio.Event()
        self._ingesting = 0
        self._idle = anyio.Event()
        self._idle.set()
        self.idle = anyio.Event()  # set whenever nothing is queued (tests wait on it)
        self.idle.set()

    @contextmanager
    def ingesting(self) -> Iterator[None]:
        """Held while a batch is ingested: a refresh reads its next chunk only once no batch is."""
        self._ingesting += 1
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        try:
            yield
        finally:
            self._ingesting -= 1
            if self._ingesting == 0:
                self._idle.set()

    async def _ingestion_idle(self) -> None:
        with anyio.move_on_after(MAX_PAUSE_S):
            await self._idle.wait()

    def stored(self, episodes: Sequence[Episode]) -> None:
        """A batch's newly stored episodes: count them per group, queue a vote, and a refresh every N."""
        if self.refresher is None or not episodes:
            return
        by_group: dict[GroupId, list[str]] = {}
        for ep in episodes:
            by_group.setdefault(ep.group_id, []).append(ep.id)
        every = self.cfg.refresh_every_episodes
        for group, ids in by_group.items():
            if self.cfg.vote:
                self._votes.append((group, ids))
            self.since_refresh[group] = self.since_refresh.get(group, 0) + len(ids)
            if (every and self.since_refresh[group] >= every) or self.refresher.resumable(group):
                self._due[group] = None
        if self._votes or self._due:
            self.idle = anyio.Event() if self.idle.is_set() else self.idle
            self._wake.set()

    async def run(self, stop: anyio.Event) -> None:
        """Votes first (cheap, and they keep communities current), then due refreshes one group at a time."""
        if self.refresher is None:
            await stop.wait()
            return
        async with anyio.create_task_group() as tg:
            async def stop_on_stop() -> None:
                await stop.wait()
                tg.cancel_scope.cancel()  # a refresh in progress stops at its next block; resumes next start

            tg.start_soon(stop_on_stop)
            try:
                while not stop.is_set():
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    await self._work()
                    if not self._votes and not self._due:
                        self.idle.set()
            finally:
                with anyio.CancelScope(shield=True):
                    await self.refresher.aclose()  # the propagation child goes with the worker

    async def _work(self) -> None:
        """Every queued vote before each refresh: a vote queued while a refresh ran goes before the next one."""
        assert self.refresher is not None
        while self._votes or self._due:
            while self._votes:
                queued, self._votes = self._votes, []
                voting = await self._voting([g for g, _ in queued])
                for group, ids in queued:
                    if group in voting:
                        await self._vote(group, ids)
            if self._due:
                group = next(iter(self._due))
                del self._due[group]
                await self._refresh_due(group)

    async def _voting(self, groups: list[GroupId]) -> set[GroupId]:
        """The queued groups that hold a community (a vote elsewhere finds none to join); none when that read fails."""
        assert self.refresher is not None
        try:
            return await self.refresher.voting_groups(groups)
        except Exception:  # noqa: BLE001 - these votes wait for the next refresh, as a failed vote does
            self.refresher.metrics.votes.labels(outcome="failed").inc()
            log.exception("which of %d groups hold a community could not be read; their votes are skipped", len(groups))
            return set()

    async def _vote(self, group: GroupId, episode_ids: list[str]) -> None:
        assert self.refresher is not None
        try:
            touched = {x for f in await self.refresher.store.episode_facts(group, episode_ids)
                       for x in (f.subject_id, f.object_id)}
            if touched:
                await self.refresher.vote(group, sorted(touched))
        except Exception:  # noqa: BLE001 - a failed vote waits for the next refresh; the loop goes on
            self.refresher.metrics.votes.labels(outcome="failed").inc()
            log.exception("community vote in %s failed", group)

    async def _refresh_due(self, group: GroupId) -> None:
        try:
            outcome = await self.refresh(group)
        except Exception:  # noqa: BLE001 - counted by the refresher (failed); retried at the next trigger
            log.exception("community refresh of %s failed", group)
            return
        if not outcome.finished:
            log.info("community refresh of %s ran out of its %.1fs; it resumes at the next trigger",
                     group, self.cfg.time_budget_s)

    async def refresh(self, group: GroupId) -> RefreshOutcome:
        assert self.refresher is not None
        self.since_refresh[group] = 0
        outcome = await self.refresher.refresh(group)
        self.outcomes = [*self.outcomes[-99:], outcome]
        return outcome
