"""The wire against a real model server (llama-cpp-python, SmolLM2-135M): calls, tokens, schema, retries, fallback.

The model is tiny and its facts are poor; these tests assert what the wire must
guarantee (one call, a schema-valid answer, the tokens it cost, the fallback when
the server refuses), never what the model understood. Each call is kept short
(a small answer schema and max_tokens) so the whole file costs a handful of calls.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from mnemobus.shared.config import Settings
from mnemobus.engine.llm.embedder import OpenAIEmbedder
from mnemobus.engine.llm.endpoint import RetryPolicy
from mnemobus.shared.errors import ConfigError
from mnemobus.kernel.llama_local import EMBEDDING_DIM
from mnemobus.store.model import Episode

from llm_support import offline_answer, value

pytestmark = pytest.mark.anyio

SMALL = {"max_entities": 2, "max_facts": 1, "max_tokens": 320}


def episode(content: str) -> Episode:
    return Episode("ep", "g", content, "user", "m", datetime(2025, 6, 15, tzinfo=UTC))


async def test_the_model_answers_in_one_schema_valid_call_and_its_tokens_are_counted(llama, make_extractor, llm_metrics):
    ex = make_extractor(llama.url, model=llama.model, timeout_s=120, **SMALL)
    got = await ex.extract(episode("My favourite tea is genmaicha."))
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="ok") == 1
    assert value(llm_metrics, "mnemobus_llm_answers_total", outcome="valid") == 1
    assert value(llm_metrics, "mnemobus_llm_extractions_total", extractor="llm") == 1
    assert value(llm_metrics, "mnemobus_llm_tokens_total", kind="prompt") > 200  # the instructions alone are ~250
    assert 0 < value(llm_metrics, "mnemobus_llm_tokens_total", kind="completion") <= SMALL["max_tokens"]
    assert len(got.entities) <= 2 + 2 and len(got.facts) <= 1  # bounded by the schema (a fact adds its two ends)


async def test_the_server_refuses_json_schema_mode_and_the_episode_falls_back(llama, make_extractor, llm_metrics):
    ex = make_extractor(llama.url, model=llama.model, structured_output="json_schema",
                        retry=RetryPolicy(max_retries=1, backoff_base_s=0.01), **SMALL)
    text = "I moved from Berlin to Lisbon."
    assert await ex.extract(episode(text)) == await offline_answer(episode(text))
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="server_error") == 2
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="unavailable") == 1


async def test_an_answer_cut_short_is_sent_back_once_then_the_episode_falls_back(llama, make_extractor, llm_metrics):
    ex = make_extractor(llama.url, model=llama.model, timeout_s=120, max_entities=2, max_facts=1, max_tokens=12)
    text = "I live in Lisbon."
    assert await ex.extract(episode(text)) == await offline_answer(episode(text))
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="chat", outcome="ok") == 2
    assert value(llm_metrics, "mnemobus_llm_answers_total", outcome="invalid") == 2
    assert value(llm_metrics, "mnemobus_llm_tokens_total", kind="completion") == 24  # each stopped at max_tokens
    assert value(llm_metrics, "mnemobus_llm_fallbacks_total", reason="invalid_answer") == 1


def test_embeddings_are_pooled_unit_vectors_batched_per_call(llama, llm_metrics):
    emb = OpenAIEmbedder(llama.url, llama.model, EMBEDDING_DIM, batch_size=2, timeout_s=60, metrics=llm_metrics)
    try:
        rows = emb.embed(["my dog is called Max", "Max is the name of my dog", "the invoice is overdue"])
    finally:
        emb.close()
    assert rows.shape == (3, EMBEDDING_DIM)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1, rtol=1e-5)
    assert rows[0] @ rows[1] > rows[0] @ rows[2]  # a paraphrase is nearer than an unrelated sentence
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="embeddings", outcome="ok") == 2


async def test_a_configured_dimension_the_model_does_not_have_refuses_start(llama, tmp_path):
    from mnemobus.kernel.backends import open_engine

    settings = Settings(store={"sqlite_path": tmp_path / "m.sqlite3"},
                        memory={"embedding": {"provider": "openai",
                                              "openai": {"base_url": llama.url, "model": llama.model, "dim": 384}}})
    with pytest.raises(ConfigError) as exc:
        await open_engine(settings)
    assert "memory.embedding.openai.dim" in str(exc.value) and f"{EMBEDDING_DIM}-dimensional" in str(exc.value)
