"""Held-out text stays out of the code: no run of 6 words from a held-out item appears in any source file.

Held out: the extraction set's report part and every blind file (bench/extraction_set/report.yaml,
bench/extraction_set/blind/*.yaml), and the LoCoMo conversation its figures are reported on (locomo_1 of the dev
split, read in place). A rule written from a held-out sentence, or a test or comment quoting one, makes its
figure a tuned one; this fails naming the file and the words.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "bench" / "extraction_set"
LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo-dev" / "locomo_dev.json"
LOCOMO_REPORTED = 1  # locomo_1: the conversation the extractor's LoCoMo figures are reported on
N = 6
SOURCES = ("mnemobus", "plugins", "worldstate", "tests", "bench")
NOT_SOURCES = (SET, ROOT / "bench" / "results")


WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def shingles(text: str, n: int = N) -> set[tuple[str, ...]]:
    w = words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def labelled_texts(path: Path) -> Iterator[str]:
    """The words said in a labelled file's items (turns and earlier turns), without the speaker's name."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for item in data.get("items", []):
        for turn in [*item.get("turns", []), *item.get("before", [])]:
            yield str(turn).partition(":")[2]


def locomo_texts(path: Path, index: int) -> Iterator[str]:
    conv = json.loads(path.read_text(encoding="utf-8"))[index]["conversation"]
    for key, session in conv.items():
        if re.fullmatch(r"session_\d+", key):
            for turn in session:
                yield turn.get("text", "")


def held_out() -> dict[tuple[str, ...], str]:
    """Every 6-word run of held-out text -> where it is from."""
    out: dict[tuple[str, ...], str] = {}
    for path in [SET / "report.yaml", *sorted((SET / "blind").glob("*.yaml"))]:
        for text in labelled_texts(path):
            out.update(dict.fromkeys(shingles(text), path.name))
    if LOCOMO.exists():
        for text in locomo_texts(LOCOMO, LOCOMO_REPORTED):
            out.update(dict.fromkeys(shingles(text), f"locomo_{LOCOMO_REPORTED}"))
    return out


def source_files() -> Iterator[Path]:
    """The project's .py files; not a virtualenv's (bench/.venv-graphiti holds 5,850 files of other people's)."""
    for top in SOURCES:
        for folder, dirs, names in os.walk(ROOT / top):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".venv"))
            for name in sorted(names):
                path = Path(folder) / name
                if name.endswith(".py") and not any(path.is_relative_to(p) for p in NOT_SOURCES):
                    yield path


def test_the_shingles_of_a_sentence_are_its_runs_of_six_words() -> None:
    assert shingles("It's a lovely day in the park today") == {
        ("it's", "a", "lovely", "day", "in", "the"), ("a", "lovely", "day", "in", "the", "park"),
        ("lovely", "day", "in", "the", "park", "today")}


def test_a_quoted_held_out_sentence_is_found_in_a_source(tmp_path: Path) -> None:
    source = tmp_path / "rule.py"
    source.write_text('# "she sold the little red boat to her neighbour"\n')
    held = shingles("Last June she sold the little red boat to a friend.")
    assert shingles(source.read_text()) & held


def test_no_source_file_quotes_held_out_text() -> None:
    held = held_out()
    if not LOCOMO.exists():
        pytest.fail(f"the LoCoMo dev split is not at {LOCOMO}: its reported conversation cannot be checked")
    found = set()
    for path in source_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for run in shingles(text) & held.keys():
            found.add(f"{path.relative_to(ROOT)}:{_line_of(text, run)} (six words as in {held[run]})")
    # the place, never the words: quoting them would show a blind item to whoever tripped this (it did once)
    assert not found, "held-out text in the code, rewrite these lines in words of your own:\n" + "\n".join(sorted(found))


def _line_of(text: str, run: tuple[str, ...]) -> int:
    """The line where the run of words starts."""
    found = list(WORD.finditer(text.lower()))
    for i in range(len(found) - len(run) + 1):
        if tuple(m.group() for m in found[i : i + len(run)]) == run:
            return text.count("\n", 0, found[i].start()) + 1
    return 0


def test_a_find_names_the_line_it_starts_on_and_not_its_words() -> None:
    text = "x = 1\n# she sold the little red\n# boat to her neighbour\n"
    assert _line_of(text, ("she", "sold", "the", "little", "red", "boat")) == 2
