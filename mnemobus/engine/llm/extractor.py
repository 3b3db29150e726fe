"""The LLM extractor: one structured-output call per episode, the offline extractor whenever it cannot answer.

One call returns the entities and facts of the message together with the model's
judgements on the candidates the engine passed in (this entity is that known one;
this fact repeats, or ends, that known one). An answer that does not validate is
sent back once with what was wrong; after that, and on a dead or refusing endpoint,
a timeout, or a spent token budget, the offline extractor takes the episode. Every
such fallback is counted by reason and logged (one line per reason and interval).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from mnemobus.engine.candidates import Candidates
from mnemobus.engine.extract import Extraction, Extractor, episode_speaker
from mnemobus.engine.llm import prompt
from mnemobus.engine.llm.answer import (
    MAX_ENTITIES, MAX_FACTS, Answer, InvalidAnswer, answer_schema, longest_answer_tokens, parse_answer,
)
from mnemobus.engine.llm.budget import TokenBudget
from mnemobus.engine.llm.client import ChatClient, StructuredOutput, response_format
from mnemobus.engine.llm.endpoint import EndpointError
from mnemobus.engine.llm.mapping import to_extraction
from mnemobus.shared.metrics import LlmMetrics
from mnemobus.shared.logthrottle import ThrottledLog
from mnemobus.store.model import Episode

log = logging.getLogger("mnemobus.llm")

# an endpoint failure's outcome -> the fallback reason it is counted under
_FALLBACK_REASON = {"timeout": "timeout", "rate_limited": "unavailable", "server_error": "unavailable",
                    "transport": "unavailable", "client_error": "refused", "bad_response": "bad_response"}


class _FallBack(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class LlmExtractor:
    name = "llm"

    def __init__(self, client: ChatClient, fallback: Extractor, *, structured_output: StructuredOutput = "json_schema",
                 max_tokens: int = 1024, temperature: float = 0.0, budget: TokenBudget | None = None,
                 metrics: LlmMetrics | None = None, max_candidate_entities: int = 8, max_candidate_facts: int = 12,
                 max_message_chars: int = 4000, max_entities: int = MAX_ENTITIES, max_facts: int = MAX_FACTS) -> None:
        self.client = client
        self.fallback = fallback
        self.structured_output = structured_output
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.budget = budget or TokenBudget(0)
        self.metrics = metrics or client.metrics
        self.max_candidate_entities = max_candidate_entities
        self.max_candidate_facts = max_candidate_facts
        self.max_message_chars = max_message_chars
        self.max_entities = max_entities
        self.max_facts = max_facts
        self._log = ThrottledLog(log)
        self._show_budget()
        if max_tokens < (longest := longest_answer_tokens(max_entities, max_facts)):
            log.warning("extraction.llm.max_tokens is %d but an answer within max_entities=%d and max_facts=%d can "
                        "take ~%d tokens: a model that fills them is cut off and falls back", max_tokens,
                        max_entities, max_facts, longest)

    def speaker_names(self, episode: Episode) -> list[str]:
        return [episode_speaker(episode).entity_name]

    async def extract(self, episode: Episode) -> Extraction:
        return await self.extract_with(episode, Candidates())

    async def extract_with(self, episode: Episode, candidates: Candidates) -> Extraction:
        try:
            answer = await self._ask(episode, candidates)
        except _FallBack as fb:
            self.metrics.fallbacks.labels(reason=fb.reason).inc()
            self.metrics.extractions.labels(extractor="offline_fallback").inc()
            self._log.warning(fb.reason, "LLM extraction fell back to the offline extractor (%s): %s", fb.reason, fb)
            done = await self.fallback.extract(episode)
            # counted under the fallback's name, so facts per episode by extractor show what each one learnt
            return done if done.extractor else replace(done, extractor=self.fallback.name)
        self.metrics.extractions.labels(extractor="llm").inc()
        return to_extraction(answer, candidates, episode_speaker(episode), episode.content, episode.reference_time)

    async def _ask(self, episode: Episode, candidates: Candidates) -> Answer:
        entity_ids, fact_ids = prompt.handles(candidates)
        bounds = {"max_entities": self.max_entities, "max_facts": self.max_facts}
        schema = answer_schema(entity_ids, fact_ids, **bounds)
        in_prompt = schema if self.structured_output == "json_object" else None
        sent = prompt.messages(episode, episode_speaker(episode).entity_name, candidates,
                               max_message_chars=self.max_message_chars, schema=in_prompt)
        fmt = response_format(self.structured_output, "memory_extraction", schema)
        for round_ in (1, 2):
            estimate = prompt.approx_tokens(sent) + self.max_tokens
            if not self.budget.allows(estimate):
                raise _FallBack("budget", f"the hourly token budget ({self.budget.tokens_per_hour}) has "
                                          f"{max(0, int(self.budget.remaining()))} left, the call needs ~{estimate}")
            started = time.perf_counter()
            try:
                reply = await self.client.complete(sent, response_format=fmt, max_tokens=self.max_tokens,
                                                   temperature=self.temperature)
            except EndpointError as exc:
                raise _FallBack(_FALLBACK_REASON.get(exc.outcome, "unavailable"),
                                f"{exc} (after {exc.attempts} attempt(s))") from exc
            self.budget.spend(reply.prompt_tokens + reply.completion_tokens)
            self._show_budget()
            try:
                answer = parse_answer(reply.content, entity_ids, fact_ids, **bounds)
            except InvalidAnswer as exc:
                self.metrics.answers.labels(outcome="invalid").inc()
                if round_ == 2:
                    raise _FallBack("invalid_answer", f"the corrected answer is still invalid: {exc}") from exc
                log.info("LLM answer invalid (%s) after %.1f s; asking once more", exc, time.perf_counter() - started)
                sent = prompt.retry_messages(sent, reply.content, str(exc))
                continue
            self.metrics.answers.labels(outcome="valid").inc()
            log.debug("LLM answer for episode %s in %.1f s (%d+%d tokens): %s", episode.id,
                      time.perf_counter() - started, reply.prompt_tokens, reply.completion_tokens, reply.content)
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _show_budget(self) -> None:
        self.metrics.budget_remaining.set(max(0.0, self.budget.remaining()) if self.budget.enabled else -1)

    async def aclose(self) -> None:
        await self.client.aclose()
