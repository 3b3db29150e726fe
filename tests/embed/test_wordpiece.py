"""The plain-text WordPiece path gives the `tokenizers` library's ids, and leaves every other text to the library."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemobus.engine.embed import LocalOnnxEmbedder
from mnemobus.engine.embed_static import StaticEmbedder
from mnemobus.engine.wordpiece import PlainWordPiece

MODEL = "all-MiniLM-L6-v2-int8"
SPECIAL = {0, 100, 101, 102, 103}


def _pair(max_tokens: int) -> tuple[PlainWordPiece, object]:
    teacher = LocalOnnxEmbedder(MODEL, max_tokens=max_tokens)
    plain = PlainWordPiece.for_tokenizer(teacher.tokenizer_path, max_tokens)
    assert plain is not None, "the installed model's tokenizer is BERT WordPiece, uncased"
    return plain, teacher.load_tokenizer()


PLAIN, LIBRARY = _pair(256)
SHORT, SHORT_LIBRARY = _pair(12)


def library_ids(tokenizer, text: str) -> list[int]:
    return [i for i in tokenizer.encode(text).ids if i not in SPECIAL]


def plain_ids(plain: PlainWordPiece, text: str) -> list[int]:
    ids = plain.ids(text)
    assert ids is not None, f"{text!r} should be plain"
    return [i for i in ids if i not in SPECIAL]


MESSAGES = [
    "What does Person0 work on and which tool?",
    "I moved to London last spring; my editor is neovim (with lazy.nvim), and I'm learning Rust!!",
    "Deploy failed: ERROR 502 at https://api.example.com/v1/users?id=42&sort=desc -- retry in 5m",
    "email me at josh.smith+memory@example.org, or call 555-0123 ext. 7",
    "unbelievably antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "def f(x): return x**2 # squares\n\tprint(f'{x=}')",
    "x" * 120 + " then a normal word",
    "ALL CAPS SHOUTING, MiXeD cAsE, snake_case_names and kebab-case-names",
    "   leading and trailing spaces   ",
    "",
    "~`!@#$%^&*()-_=+[]{}\\|;:'\",<.>/?",
    "the 3rd of May 2026 at 10:30am, 42.5% up, $1,000,000",
]


@pytest.mark.parametrize("text", MESSAGES)
def test_a_plain_message_gets_the_librarys_ids(text):
    assert plain_ids(PLAIN, text) == library_ids(LIBRARY, text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(min_codepoint=32, max_codepoint=126), st.sampled_from("\t\n\r")),
               max_size=300))
def test_any_printable_ascii_text_gets_the_librarys_ids(text):
    assert plain_ids(PLAIN, text) == library_ids(LIBRARY, text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=100))
def test_any_ascii_text_gets_the_librarys_ids_or_is_left_to_it(text):
    ids = PLAIN.ids(text)
    assert ids is None or [i for i in ids if i not in SPECIAL] == library_ids(LIBRARY, text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["neovim", "London", "x", "!", "Person0", "unbelievably", "a-b"]), max_size=30))
def test_a_long_text_is_cut_where_the_librarys_truncation_cuts_it(words):
    text = " ".join(words)
    assert plain_ids(SHORT, text) == library_ids(SHORT_LIBRARY, text)


@pytest.mark.parametrize("text", ["café au lait", "東京に住んでいる", "naïve", "a\x00b", "tab\x0bvertical",
                                  "the [CLS] token", "[MASK] me", "smart “quotes”"])
def test_text_that_is_not_plain_ascii_is_left_to_the_library(text):
    assert PLAIN.ids(text) is None


def test_the_embedder_gives_the_same_vectors_with_and_without_the_plain_path(static_cache_dir):
    emb = StaticEmbedder(MODEL, static_cache_dir)
    texts = MESSAGES + ["café au lait", "the [CLS] token"]
    fast = emb.embed(texts)
    assert emb._plain is not None
    emb._plain = None  # every text through the library
    assert np.array_equal(fast, emb.embed(texts))
