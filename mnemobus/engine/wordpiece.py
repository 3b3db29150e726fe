"""The BERT WordPiece tokenizer for plain ASCII text, in Python, giving the same ids as the `tokenizers` library.

Why: a query is embedded on every request, and the library's call (normalizer, pre-tokenizer, an `Encoding` with
offsets, tokens and masks) costs ~90 us of CPU on a request that finds the caches cold, against ~20 us for this
(docs/performance.md, after stop 55). Only what such a text needs is here: lower-casing, splitting on whitespace
and ASCII punctuation, greedy longest-match word pieces. Anything else (accents, CJK, control characters, the
special tokens written out) is left to the library, which `ids` says by returning None.
`tests/embed/test_wordpiece.py` holds it to the library's ids.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# a word or one punctuation mark, on lower-cased ASCII (every printable ASCII mark is punctuation to BERT)
_PIECES = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
# what BERT's normalizer drops: control characters (tab, newline and carriage return are whitespace to it)
_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"


class PlainWordPiece:
    def __init__(self, vocab: dict[str, int], *, unk_token: str, prefix: str, max_word_chars: int,
                 max_ids: int, added: list[str]) -> None:
        self.vocab = vocab
        # the tokenizer's added tokens ([CLS], [MASK], ...) are matched in the raw text, before normalizing
        self._not_plain = re.compile("|".join([_CONTROL, *(re.escape(t) for t in added)]))
        self.unk = vocab[unk_token]
        self.prefix = prefix
        self.max_word_chars = max_word_chars
        self.max_ids = max_ids  # truncation: the ids a text keeps, the specials around it not counted

    @classmethod
    def for_tokenizer(cls, path: Path, max_tokens: int) -> PlainWordPiece | None:
        """The fast path for the tokenizer file at `path` (truncated to `max_tokens` with [CLS] and [SEP]), or None
        when that tokenizer is not the uncased BERT WordPiece this reproduces."""
        spec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        model, norm, pre = spec.get("model") or {}, spec.get("normalizer") or {}, spec.get("pre_tokenizer") or {}
        if (model.get("type"), norm.get("type"), pre.get("type")) != ("WordPiece", "BertNormalizer", "BertPreTokenizer"):
            return None
        if not (norm.get("lowercase") and norm.get("clean_text")):
            return None
        return cls(model["vocab"], unk_token=model["unk_token"], prefix=model["continuing_subword_prefix"],
                   max_word_chars=model["max_input_chars_per_word"], max_ids=max_tokens - 2,
                   added=[t["content"] for t in spec.get("added_tokens") or []])

    def ids(self, text: str) -> list[int] | None:
        """The text's token ids without [CLS] and [SEP], or None when it is not plain ASCII (the library's turn)."""
        if not text.isascii() or self._not_plain.search(text):
            return None
        out: list[int] = []
        for word in _PIECES.findall(text.lower()):
            whole = self.vocab.get(word)
            if whole is not None:
                out.append(whole)
            else:
                self._pieces(word, out)
            if len(out) >= self.max_ids:
                return out[: self.max_ids]
        return out

    def _pieces(self, word: str, out: list[int]) -> None:
        """Greedy longest match first, continuations prefixed; a word with no full cover is one unknown token."""
        if len(word) > self.max_word_chars:
            out.append(self.unk)
            return
        found: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if (token := self.vocab.get(piece)) is not None:
                    found.append(token)
                    break
                end -= 1
            else:
                out.append(self.unk)
                return
            start = end
        out.extend(found)
