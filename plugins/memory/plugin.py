"""The memory plugin: enrich a skill request with recalled facts, forward it, record the exchange.

Fail open on the way in (memory trouble never blocks an agent: recall runs
under one deadline and the request goes on unenriched when it expires), fail
safe on the way out (episodes go to a durable stream with a message id the
server de-duplicates, and the worker acks only what it stored).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mnemobus.shared import subjects
from mnemobus.bus.endpoint import MessageContext
from mnemobus.bus.errors import NoResponders, RequestTimeout
from mnemobus.bus.router import Router
from mnemobus.shared.envelope import EnrichedRequest, EpisodeMessage, MemoryContext, SkillRequest, SkillResponse
from mnemobus.shared.groups import GroupId
from mnemobus.engine.render import enriched_content
from mnemobus.shared.identity import Resolution
from mnemobus.shared.limits import clip
from mnemobus.shared.logthrottle import ThrottledLog
from mnemobus.kernel.plugin import PluginContext
from plugins.memory.enrich import RecallGuards, recall_for_request
from plugins.memory.breaker import RecallBreaker
from plugins.memory.formation import FormationGate
from plugins.memory.budget import RecallBudget
from plugins.memory.looplag import LoopLag
from plugins.memory.outbox import EpisodeOutbox
from mnemobus.store.model import episode_id_for
from mnemobus.kernel.warming import warm_recall_indexes

log = logging.getLogger("mnemobus.plugin.memory")


class MemoryPlugin:
    name = "memory"

    def __init__(self) -> None:
        self.router = Router(subjects.PLUGIN_QUEUE)
        self.router.subscriber(subjects.SKILL_REQUEST, model=SkillRequest, queue=subjects.PLUGIN_QUEUE,
                               name="skill_request")(self.on_request)
        self.ctx: PluginContext | None = None
        self.warmed: list[GroupId] = []  # groups whose indexes were loaded at start

    async def start(self, ctx: PluginContext) -> None:
        self.ctx = ctx
        m = ctx.settings.memory
        self.gate = FormationGate(m.form_every_n_messages, m.form_every_n_tokens, m.form_cold_after_s)
        self.guards = RecallGuards(RecallBreaker(m.breaker_failures, m.breaker_cooldown_s),
                                   anyio.CapacityLimiter(m.max_concurrent_recalls), LoopLag(m.shed_loop_lag_ms),
                                   RecallBudget(m.recall_time_share))
        self.outbox = EpisodeOutbox(m.outbox_path)
        self._outbox_log = ThrottledLog(log)  # a stream away for minutes: one line per 10 s, not per second
        self._scopes: list[anyio.CancelScope] = []
        ctx.spawn(self._background, self._outbox_loop)
        if self.guards.loop_lag.enabled:
            ctx.spawn(self._background, self.guards.loop_lag.watch)
        if self.gate.buffering:
            ctx.spawn(self._background, self._sweep_loop)
        ctx.spawn(self._background, self._warm)

    async def _warm(self) -> None:
        """Load the recently active groups' indexes while the first requests arrive (they do not wait for it)."""
        ctx = self.ctx
        assert ctx is not None
        self.warmed = await warm_recall_indexes(ctx.engine, ctx.settings.memory.warm_groups, ctx.metrics,
                                                ctx.settings.memory.warm_groups_prefix)

    async def _background(self, loop) -> None:  # type: ignore[no-untyped-def]
        """Run a loop until stop() cancels it."""
        with anyio.CancelScope() as scope:
            self._scopes.append(scope)
            await loop()

    async def _outbox_loop(self) -> None:
        """Republish parked episodes until the stream takes them; the message id keeps this idempotent."""
        while True:
            ctx = self.ctx
            if ctx is None:
                return
            for msg_id, subject, data in await anyio.to_thread.run_sync(self.outbox.pending):
                try:
                    await ctx.bus.js_publish(subject, data, msg_id=msg_id)
                except Exception as exc:  # noqa: BLE001 - the stream is still away: the episode stays parked
                    ctx.metrics.outbox_retry_errors.inc()
                    self._outbox_log.warning("outbox", "parked episodes not republished yet (%s: %s); retrying in 1 s",
                                             type(exc).__name__, exc)
                    await anyio.to_thread.run_sync(self.outbox.failed_again, msg_id)
                    break
                await anyio.to_thread.run_sync(self.outbox.delivered, msg_id)
                ctx.metrics.episodes_emitted.inc()
            ctx.metrics.outbox_depth.set(await anyio.to_thread.run_sync(self.outbox.depth))
            await anyio.sleep(1.0)

    async def _sweep_loop(self) -> None:
        """Cold sessions still become episodes, however long the user stays away."""
        while True:
            await anyio.sleep(min(30.0, self.gate.cold_after_s / 2))
            for episode in self.gate.sweep():
                await self._publish_episode(self.ctx, episode)

    async def stop(self) -> None:
        for scope in getattr(self, "_scopes", []):
            scope.cancel()
        if self.ctx is not None:
            for episode in self.gate.sweep(everything=True):  # drain: nothing buffered is dropped
                await self._publish_episode(self.ctx, episode)
            self.outbox.close()
        self.ctx = None

    def _say(self, text: str) -> None:
        if self.ctx and self.ctx.echo:
            self.ctx.echo(f"[memory plugin] {text}")

    async def on_request(self, req: SkillRequest, mctx: MessageContext) -> None:
        self.guards.requests += 1  # what shedding weighs a recall against (enrich.recall_for_request)
        try:
            await self._handle(req, mctx)
        finally:
            self.guards.requests -= 1

    async def _handle(self, req: SkillRequest, mctx: MessageContext) -> None:
        ctx = self.ctx
        assert ctx is not None, "plugin used before start"
        agent_id = req.payload.meta.agent_id
        who = ctx.identity.resolve(req.source.platform, req.source.user_id, agent_id, req.payload.meta.system_actor,
                                   trusted=ctx.settings.nats.permissions_enforced)
        skill = req.payload.skill or req.payload.meta.skill_hint
        if skill and skill in ctx.settings.memory.exclude_skills:
            who = Resolution((), who.user, f"skill_excluded:{skill}")
        if who.groups:
            mctx.group_id = who.groups[0]
        memory = await self._recall(ctx, req, who, mctx.queued_s)
        ctx.metrics.requests.labels(status=memory.status).inc()
        self._say(f"request {req.id[:8]} from {req.source.platform}:{req.source.user_id or '-'} -> "
                  f"groups {list(who.groups) or '(none: ' + who.reason + ')'}; recall {memory.status}, "
                  f"{memory.facts} fact(s), {memory.latency_ms:.1f} ms")
        original = req.payload.content
        enriched = EnrichedRequest.model_validate(req.model_dump(by_alias=True))
        enriched.memory = memory
        enriched.original_content = original
        # the user's words under their own header, no line of them able to pass for one the system writes
        enriched.payload.content = enriched_content(memory.block, original)

        response = await self._execute(ctx, enriched, agent_id)
        sent = await self._emit_episodes(ctx, req, response, who) if who.groups and response.error is None else []
        await self._answer(ctx, req, mctx, response, agent_id)
        for episode, ack in sent:  # the answer went out behind the episodes; now each is confirmed or parked
            await self._confirm_episode(ctx, episode, ack)

    async def _answer(self, ctx: PluginContext, req: SkillRequest, mctx: MessageContext, response: SkillResponse,
                      agent_id: str) -> None:
        """Every subject the answer goes to; one that fails is counted and logged, and never costs the episode.

        The requester's own subjects get the whole answer; the broadcast copy leaves out what memory recalled
        unless `memory.memory_in_broadcast` says every listener may read it."""
        wire = response.to_wire()
        targets = [(mctx.reply, wire)] if mctx.reply else []
        if req.reply and req.reply.topic and req.reply.topic != mctx.reply:
            targets.append((req.reply.topic, wire))
        broadcast = wire if ctx.settings.memory.memory_in_broadcast else broadcast_copy(response).to_wire()
        targets.append((subjects.skill_response(agent_id), broadcast))
        for target, data in targets:
            try:
                await ctx.bus.publish(target, data)
            except Exception as exc:  # noqa: BLE001 - the exchange still becomes memory
                ctx.metrics.reply_errors.inc()
                log.warning("could not publish the answer to request %s on %s: %s", req.id, target, exc)

    async def _recall(self, ctx: PluginContext, req: SkillRequest, who: Resolution, queued_s: float) -> MemoryContext:
        if not who.memory_on:
            status = "disabled" if who.reason == "memory_disabled" else "skipped"
            return MemoryContext(status=status)
        return await recall_for_request(ctx, req.payload.content, who.read_groups, self.guards,
                                        (req.source.channel_id,), queued_s)

    async def _execute(self, ctx: PluginContext, enriched: EnrichedRequest, agent_id: str) -> SkillResponse:
        base = dict(correlation_id=enriched.trace_id, request_id=enriched.id, agent_id=agent_id, memory=enriched.memory)
        timeout = ctx.settings.memory.executor_timeout_s
        try:
            msg = await ctx.bus.request(subjects.skill_execute(agent_id), enriched.to_wire(), timeout)
        except NoResponders:
            ctx.metrics.executor_errors.labels(kind="no_responders").inc()
            return SkillResponse(error=f"no executor is listening on {subjects.skill_execute(agent_id)}", **base)
        except (RequestTimeout, TimeoutError):
            ctx.metrics.executor_errors.labels(kind="timeout").inc()
            return SkillResponse(error=f"executor for agent {agent_id!r} did not answer within {timeout:g}s", **base)
        content, error = _read_executor_reply(msg.data)
        if error:
            ctx.metrics.executor_errors.labels(kind="error").inc()
        return SkillResponse(content=content, error=error, **base)

    async def _emit_episodes(self, ctx: PluginContext, req: SkillRequest, response: SkillResponse,
                             who: Resolution) -> list[tuple[EpisodeMessage, Callable[[], Awaitable[Any]] | None]]:
        """The exchange's episodes, each put on the connection before the answer is (its ack is awaited after):
        a plugin killed right after answering has sent every episode of what it answered."""
        groups = who.groups
        if not req.payload.content.strip():
            ctx.metrics.episodes_not_formed.labels(reason="blank_content").inc()
            self._say(f"request {req.id[:8]} had no words to remember; no episode")
            return []
        sent: list[tuple[EpisodeMessage, Callable[[], Awaitable[Any]] | None]] = []
        for group in groups:
            episode = EpisodeMessage(
                episode_id=episode_id_for(group, req.id, "exchange"),
                group_id=group,
                content=req.payload.content,
                response=clip(response.content) if response.content else None,
                source_message_id=req.id,
                correlation_id=req.trace_id,
                agent_id=req.payload.meta.agent_id,
                platform=req.source.platform,
                channel_id=req.source.channel_id,
                user_id=req.source.user_id,
                speaker_name=speaker_name(who),
                reference_time=req.timestamp,
            )
            ready = self.gate.offer(episode)
            if ready is not None:
                ready, data = _fitted(ctx, ready)
                try:
                    ack = await ctx.bus.js_send(subjects.episode(GroupId(ready.group_id)), data,
                                                msg_id=ready.episode_id)
                except Exception as exc:  # noqa: BLE001 - not even on the wire: published again below
                    log.debug("episode %s not sent at once: %s", ready.episode_id, exc)
                    ack = None
                sent.append((ready, ack))
        self._say(f"episode(s) for request {req.id[:8]} queued to {', '.join(groups)}")
        return sent

    async def _confirm_episode(self, ctx: PluginContext, episode: EpisodeMessage,
                               ack: Callable[[], Awaitable[Any]] | None) -> None:
        """The stream's ack of a sent episode; without one it is published again, or parked (`_publish_episode`)."""
        if ack is not None:
            try:
                await ack()
                ctx.metrics.episodes_emitted.inc()
                return
            except Exception as exc:  # noqa: BLE001 - the message id makes publishing again harmless
                log.debug("episode %s not acknowledged (%s); publishing it again", episode.episode_id, exc)
        await self._publish_episode(ctx, episode)

    async def _publish_episode(self, ctx: PluginContext, episode: EpisodeMessage) -> None:
        """Publish, or park in the outbox: an exchange is never dropped because the stream hiccuped."""
        episode, data = _fitted(ctx, episode)
        subject = subjects.episode(GroupId(episode.group_id))
        for attempt in (1, 2):
            try:
                await ctx.bus.js_publish(subject, data, msg_id=episode.episode_id)
                ctx.metrics.episodes_emitted.inc()
                return
            except Exception as exc:
                last = exc
                if attempt == 1:
                    await anyio.sleep(0.1)
        await anyio.to_thread.run_sync(self.outbox.park, episode.episode_id, subject, data)
        ctx.metrics.episode_emit_errors.inc()
        log.warning("episode %s for group %s parked in the outbox (%s): %s",
                    episode.episode_id, episode.group_id, self.outbox.path, last)


def broadcast_copy(response: SkillResponse) -> SkillResponse:
    """The answer for every subscriber of agent.skill.response.*: recall's outcome, none of what it recalled."""
    if response.memory is None:
        return response
    kept = response.memory.model_copy(update={"block": "", "groups": []})
    return response.model_copy(update={"memory": kept})


def speaker_name(who: Resolution) -> str | None:
    """The user's name from users.yaml (display name, else canonical id): first person in their messages is them."""
    if who.user is None:
        return None
    return who.user.display_name or who.user.id


def _read_executor_reply(data: bytes) -> tuple[str | None, str | None]:
    """Executors answer JSON `{content, error}`; plain text is taken as content."""
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return data.decode("utf-8", "replace"), None
    if isinstance(body, dict):
        if body.get("error"):
            return body.get("content"), str(body["error"])
        if "content" in body:
            return (None if body["content"] is None else str(body["content"])), None
    return data.decode("utf-8", "replace"), None


def _fitted(ctx: PluginContext, episode: EpisodeMessage) -> tuple[EpisodeMessage, bytes]:
    """The episode within what the worker takes and the server carries with the headers (limits in bytes), and
    its wire form, encoded once."""
    return episode.wire_within(min(ctx.settings.nats.max_message_bytes, ctx.bus.max_payload - 1024))
