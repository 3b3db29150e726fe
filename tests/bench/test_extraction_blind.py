"""The blind-set harness: the extended labelled format, its figures, and one file scored end to end through
POST /messages (tests/bench/blind_fixture/sample.yaml, a synthetic file written for this test)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from extraction_score import Item, Tally, Triple, load_items  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "blind_fixture" / "sample.yaml"
AT = datetime(2026, 6, 15, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _static_table(static_cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's static embedding table is the run's (built once per machine), not one built in data/."""
    monkeypatch.setenv("EMBED_CACHE", str(static_cache_dir))


def item(id_: str, facts: list[str] = (), ends: list[str] = (), keeps: list[str] = (), **kw: str) -> Item:  # type: ignore[assignment]
    parse = lambda xs: [Triple(*[p.strip() for p in x.split("|")]) for x in xs]  # noqa: E731
    return Item(id_, [("Ana", "...")], AT, parse(facts), [], parse(ends), keeps=parse(keeps), **kw)


def test_the_blind_format_loads_fact_ids_tiers_earlier_turns_and_keeps() -> None:
    s3 = {i.id: i for i in load_items(FIXTURE)}["s3"]
    assert (s3.fact_id, s3.tier, s3.before, s3.ends) == ("move", "plain", [("Greta", "I live in Leeds.")],
                                                          [Triple("Greta", "lives_in", "Leeds")])


def test_a_tier_outside_the_three_is_refused_naming_the_item(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("at: 2026-06-15T12:00:00Z\nitems:\n  - id: x1\n    tier: slangy\n    turns: ['A: hi']\n")
    with pytest.raises(ValueError, match="x1: tier must be one of plain, reworded, idiomatic"):
        load_items(bad)


def test_recall_is_reported_per_phrasing_tier() -> None:
    tally = Tally()
    tally.add_facts(item("a", ["Ana | lives_in | Oslo"], tier="plain"), [(Triple("Ana", "lives_in", "Oslo"), None)])
    tally.add_facts(item("b", ["Ana | lives_in | Oslo"], tier="idiomatic"), [])
    assert (tally.figures()["recall_plain"], tally.figures()["recall_idiomatic"]) == (1.0, 0.0)


def test_consistency_is_the_mean_share_of_a_facts_phrasings_that_yield_it() -> None:
    tally = Tally()
    found = [(Triple("Ana", "works_at", "Ocado"), None)]
    tally.add_facts(item("a", ["Ana | works_at | Ocado"], fact_id="job"), found)
    tally.add_facts(item("b", ["Ana | works_at | Ocado"], fact_id="job"), [])
    tally.add_facts(item("c", ["Ana | lives_in | Oslo"], fact_id="home"), [(Triple("Ana", "lives_in", "Oslo"), None)])
    assert tally.figures()["consistency"] == 0.75  # (1/2 + 1/1) / 2


def test_any_held_fact_wrongly_ended_is_collateral_and_a_kept_one_is_counted_apart() -> None:
    tally = Tally()
    kept = Triple("Ana", "speaks", "French")
    tally.add_held_endings(item("a", ends=["Ana | diet | vegan"], keeps=["Ana | speaks | French"], fact_id="d"),
                           [Triple("Ana", "is", "vegan"), kept])
    figures = tally.figures()
    assert (figures["endings_recall"], figures["collateral_endings"], figures["keeps_ended"]) == (1.0, 1, 1)


def test_a_fact_to_end_whose_confidence_rose_is_counted() -> None:
    tally = Tally()
    tally.add_held_endings(item("a", ends=["Ana | diet | vegan"], fact_id="d"), [], [Triple("Ana", "is", "vegan")])
    assert tally.figures()["ends_raised_confidence"] == 1


@pytest.mark.anyio
async def test_a_file_is_scored_end_to_end_from_what_the_extractor_stored_from_the_earlier_turns(
        tmp_path: Path) -> None:
    from bench_locomo_public import Service
    from extraction_blind import score_file

    async with Service(tmp_path, {}) as svc:
        figures, _ = await score_file(svc, FIXTURE)
    assert (figures["items"], figures["facts_gold"]) == (5, 4)
    # the move ends the home the extractor stored from "I live in Leeds"; the denial ends nothing kept
    assert (figures["endings_recall"], figures["collateral_endings"], figures["keeps_ended"]) == (1.0, 0, 0)
    assert figures["ends_raised_confidence"] == 0 and figures["recall_plain"] == 1.0


def test_endings_are_reported_per_tier_and_for_consistency_across_a_changes_phrasings() -> None:
    tally = Tally()
    tally.add_held_endings(item("a", ends=["Ana | lives_in | Oslo"], fact_id="move", tier="plain"),
                           [Triple("Ana", "lives_in", "Oslo")])
    tally.add_held_endings(item("b", ends=["Ana | lives_in | Oslo"], fact_id="move", tier="idiomatic"), [])
    figures = tally.figures()
    assert (figures["endings_recall_plain"], figures["endings_recall_idiomatic"], figures["endings_consistency"]) == (
        1.0, 0.0, 0.5)


def test_pooled_change_files_weigh_every_item_alike_and_keep_their_phrasings_apart() -> None:
    small, large = Tally(), Tally()
    small.add_held_endings(item("a", ends=["Ana | lives_in | Oslo"], fact_id="move"), [])
    for n in range(3):
        large.add_held_endings(item(f"b{n}", ends=["Ana | works_at | Ocado"], fact_id="move"),
                               [Triple("Ana", "works_at", "Ocado")])
    figures = Tally.pooled([("changes_1", small), ("changes_2", large)]).figures()
    # 3 of 4 endings found (a mean of the two files' recalls would say 0.5); "move" is two changes, not one
    assert (figures["endings_recall"], figures["endings_consistency"]) == (0.75, 0.5)


@pytest.mark.anyio
async def test_the_bench_reports_the_change_files_pooled_end_to_end(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from bench_extraction import blind_figures

    folder = tmp_path / "set"
    folder.mkdir()
    for name in ("changes_a", "changes_b", "facts"):
        (folder / f"{name}.yaml").write_text(FIXTURE.read_text())
    monkeypatch.setenv("BLIND_DIR", str(folder))
    figures = await blind_figures(tmp_path)
    assert (figures["blind_changes_pooled_files"], figures["blind_changes_pooled_items"]) == (2, 10)
    assert figures["blind_changes_pooled_endings_recall"] == figures["blind_changes_a_endings_recall"] == 1.0
    assert figures["blind_changes_pooled_collateral_endings"] == 0
