"""The labelled dev set runs with the tests: a rule change that costs the offline extractor facts or endings on it
fails here, not only in the bench. (The report part and blind files are never run here: they stay for reporting.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bench_extraction as bench  # noqa: E402
from extraction_score import Tally, load_items  # noqa: E402


@pytest.fixture(scope="module")
def dev_figures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    import anyio

    async def run() -> dict[str, float]:
        items = load_items(bench.DATA / "dev.yaml")
        extractor = bench._parsed()
        tally = Tally()
        await bench.score_facts(extractor, items, tally)
        await bench.score_endings(extractor, items, tally, tmp_path_factory.mktemp("dev"))
        return tally.figures()

    return anyio.run(run)


def test_dev_facts_keep_their_precision_and_recall(dev_figures: dict[str, float]) -> None:
    assert dev_figures["facts_precision"] >= 0.97 and dev_figures["facts_recall"] >= 0.95, dev_figures


def test_dev_endings_are_all_found_with_none_collateral(dev_figures: dict[str, float]) -> None:
    assert (dev_figures["endings_recall"], dev_figures["endings_precision"], dev_figures["collateral_endings"]) == (
        1.0, 1.0, 0), dev_figures


def test_dev_dates_are_right(dev_figures: dict[str, float]) -> None:
    assert dev_figures["dates_right"] == 1.0, dev_figures
