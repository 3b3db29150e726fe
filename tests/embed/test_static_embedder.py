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


def test_two_embedders_starting_together_on_one_cache_directory_build_the_table_once(tmp_path, monkeypatch):
    """The build (20 s to minutes) is the distillation, stood in for here: the subject is the lock around it.
    The first build waits up to 2 s for a second one to start; with the lock none does."""
    import threading

    from mnemobus.engine import embed_static

    builds: list[int] = []
    second_build = threading.Event()

    def counted_distil(teacher, progress=None):
        builds.append(1)
        if len(builds) == 1:
            second_build.wait(timeout=2)
        else:
            second_build.set()
        return np.ones((8, 384), dtype=np.float32)

    monkeypatch.setattr(embed_static, "distil", counted_distil)
    embedders = [StaticEmbedder(MODEL, tmp_path), StaticEmbedder(MODEL, tmp_path)]
    threads = [threading.Thread(target=e._load) for e in embedders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(builds) == 1
    assert all(e._table is not None and e._table.shape == (8, 384) for e in embedders)
