"""Every measured figure the README quotes comes from a committed bench result, and bench/report.md is theirs.

The convention (README, "Benchmarks"): a figure is written as a link to its source,
`[0.889](bench/results/bench_extraction.json#offline_report_facts_precision)`: the committed result file, then
the figure's key in it (`/` steps into a nested object). The link's text is the value as the bench wrote it,
rounded to the decimals the text shows.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RESULTS = ROOT / "bench" / "results"
FIGURE_LINK = re.compile(r"\[(?P<text>[^\]\[]+)\]\((?P<file>bench/results/[\w.-]+\.json)#(?P<key>[^)\s]+)\)")
#: a quality figure as the benches print them (three decimals: recall, precision, a share), outside any link
UNSOURCED = re.compile(r"(?<![\w.#/])\d\.\d{3}(?![\w.])")


def figure_links() -> list[re.Match[str]]:
    return list(FIGURE_LINK.finditer(README.read_text()))


def lookup(result: dict[str, Any], key: str) -> Any:
    value: Any = result
    for step in key.split("/"):
        assert isinstance(value, dict) and step in value, f"no {step!r} in {sorted(value)[:20] if isinstance(value, dict) else value!r}"
        value = value[step]
    return value


def as_written(value: Any, text: str) -> str:
    """`value` rounded and formatted the way `text` writes a number (decimals, thousands commas)."""
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    shown = f"{float(value):,.{decimals}f}"
    return shown if "," in text else shown.replace(",", "")


@pytest.mark.parametrize("link", figure_links(), ids=lambda m: f"{Path(m['file']).stem}#{m['key']}")
def test_a_figure_the_readme_quotes_is_the_value_in_its_committed_result(link: re.Match[str]) -> None:
    path = ROOT / link["file"]
    assert path.is_file(), f"{link['file']} is not in the repository: run its bench and commit the result"
    value = lookup(json.loads(path.read_text()), link["key"])
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{link['key']} is not a number: {value!r}"
    assert as_written(value, link["text"]) == link["text"], (
        f"the README says {link['text']} for {link['file']}#{link['key']}, the committed result says {value}")


def test_the_readme_quotes_no_quality_figure_without_its_source() -> None:
    unlinked = FIGURE_LINK.sub("", README.read_text())
    found = [(n + 1, line.strip()[:120]) for n, line in enumerate(unlinked.splitlines()) if UNSOURCED.search(line)]
    assert found == [], "figures without a link to their bench result (README lines): " + repr(found)


def test_the_readme_quotes_every_committed_result_it_links_to() -> None:
    quoted = {Path(m["file"]).name for m in figure_links()}
    assert quoted, "the README links no figure to a bench result"
    committed = {p.name for p in RESULTS.glob("*.json")}
    assert quoted <= committed, f"linked but not committed: {sorted(quoted - committed)}"


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_bench_results_are_not_git_ignored_but_quick_runs_are() -> None:
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0

    assert not ignored("bench/results/bench_extraction.json")
    assert ignored("bench/results/quick/bench_extraction.json")


def test_the_committed_report_is_the_one_the_committed_results_give() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import report
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert (ROOT / "bench" / "report.md").read_text() == report.render(report.load_results()), (
        "bench/report.md is stale: run `make bench-report` (or `.venv/bin/python bench/report.py`) and commit it")
