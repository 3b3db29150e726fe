"""The static embedder: distilled from the installed model, cached, and still semantic."""

import numpy as np
import pytest

from mnemobus.engine.embed_static import StaticEmbedder

MODEL = "all-MiniLM-L6-v2-int8"


@pytest.fixture(scope="module")
def cache_dir(static_cache_dir):
    return static_cache_dir


@pytest.fixture(scope="module")
def static(cache_dir):
    emb = StaticEmbedder(MODEL, cache_dir)
    emb.embed(["warm"])  # builds the table once for the module
    return emb


def test_paraphrase_scores_above_an_unrelated_sentence(static):
    v = static.embed(["I live in London", "my home is in England", "revenue grew last quarter"])
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3


def test_vectors_are_unit_length_with_the_model_dimension(static):
    v = static.embed(["Alex works on ProjectX", ""])
    assert v.shape == (2, 384)
    assert np.isclose(np.linalg.norm(v[0]), 1.0, atol=1e-5)


def test_text_of_only_unknown_characters_embeds_to_zero_not_nan(static):
    v = static.embed(["\u2063\u2063"])
    assert not np.isnan(v).any()


def test_table_is_built_once_and_reloaded_from_the_cache(static, cache_dir):
    files = list(cache_dir.glob("*.npy"))
    assert len(files) == 1
    again = StaticEmbedder(MODEL, cache_dir)
    texts = ["we decided to adopt pgvector"]
    assert np.allclose(again.embed(texts), static.embed(texts))
    assert list(cache_dir.glob("*.npy")) == files
