"""The OpenAI-compatible embedder on a scripted server: batches, order, dimension checks, retries, timeouts."""

from __future__ import annotations

import numpy as np
import pytest

from mnemobus.engine.llm.embedder import EmbeddingDimensionMismatch, OpenAIEmbedder
from mnemobus.engine.llm.endpoint import EndpointError, RetryPolicy

from llm_support import FAST_RETRY, value
from fake_openai import embeddings, hang, status


def embedder(fake, llm_metrics, dim=3, **kw) -> OpenAIEmbedder:  # type: ignore[no-untyped-def]
    kw.setdefault("retry", FAST_RETRY)
    return OpenAIEmbedder(fake.url, "emb", dim, metrics=llm_metrics, **kw)


def test_texts_go_in_batches_and_come_back_in_order_as_unit_rows(fake, llm_metrics):
    first = embeddings([[3, 0, 0], [0, 4, 0]])
    first_body = first.body.replace(b'"index": 0', b'"index": 9').replace(b'"index": 1', b'"index": 0')
    first.body = first_body.replace(b'"index": 9', b'"index": 1')  # the server answers out of order
    fake.will(first, embeddings([[0, 0, 2], [1, 1, 0]]), embeddings([[0, 5, 0]]))
    rows = embedder(fake, llm_metrics, batch_size=2).embed(["a", "b", "c", "d", "e"])
    assert [s.body["input"] for s in fake.seen] == [["a", "b"], ["c", "d"], ["e"]]
    assert rows.shape == (5, 3) and rows.dtype == np.float32
    np.testing.assert_allclose(rows[0], [0, 1, 0])  # "a" got the vector at index 0, listed second
    np.testing.assert_allclose(rows[1], [1, 0, 0])
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1, rtol=1e-6)
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="embeddings", outcome="ok") == 3


def test_an_empty_text_is_a_zero_row_and_is_not_sent(fake, llm_metrics):
    fake.will(embeddings([[1, 0, 0]]))
    rows = embedder(fake, llm_metrics).embed(["", "x"])
    assert fake.seen[0].body["input"] == ["x"]
    assert not rows[0].any() and rows[1][0] == 1


def test_vectors_of_another_dimension_are_refused_naming_the_key_to_change(fake, llm_metrics):
    fake.will(embeddings([[1.0] * 576]))
    with pytest.raises(EmbeddingDimensionMismatch) as exc:
        embedder(fake, llm_metrics, dim=384).embed(["x"])
    assert "memory.embedding.openai.dim" in str(exc.value) and "576-dimensional" in str(exc.value)
    assert "384" in str(exc.value)


def test_one_vector_per_token_is_refused_as_an_unpooled_server(fake, llm_metrics):
    fake.will(embeddings([[[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]]))  # type: ignore[list-item]
    with pytest.raises(EmbeddingDimensionMismatch, match="one vector per token"):
        embedder(fake, llm_metrics).embed(["two tokens"])


def test_a_server_error_is_retried_and_then_answered(fake, llm_metrics):
    fake.will(status(502), embeddings([[0, 1, 0]]))
    rows = embedder(fake, llm_metrics).embed(["x"])
    assert rows[0][1] == 1 and fake.calls == 2
    assert value(llm_metrics, "mnemobus_llm_retries_total", endpoint="embeddings", reason="server_error") == 1


def test_a_hanging_server_times_out_and_the_error_says_so(fake, llm_metrics):
    fake.will(hang(30))
    e = embedder(fake, llm_metrics, timeout_s=0.3, retry=RetryPolicy(max_retries=1, backoff_base_s=0.01))
    with pytest.raises(EndpointError) as exc:
        e.embed(["x"])
    assert exc.value.outcome == "timeout" and exc.value.attempts == 2 and fake.calls == 2
    assert value(llm_metrics, "mnemobus_llm_calls_total", endpoint="embeddings", outcome="timeout") == 2


def test_an_answer_with_too_few_vectors_is_a_bad_response(fake, llm_metrics):
    fake.will(embeddings([[1, 0, 0]]))
    with pytest.raises(EndpointError, match="asked for 2 embeddings"):
        embedder(fake, llm_metrics).embed(["x", "y"])
