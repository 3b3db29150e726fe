"""takes_medication per condition (issue 35): the extractor reads what a medicine is taken for ("for blood
pressure") as the fact's qualifier and a switch ("from X to Y") as the medicine it replaces; the relation table
says, as data, that the relation holds one value per qualifier. Sentences of this file's own."""

from __future__ import annotations

from datetime import UTC, datetime

from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.engine.relations import RELATIONS, canonical, one_value, per_qualifier
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode

AT = datetime(2026, 6, 15, 12, tzinfo=UTC)
EXTRACTOR = ParsedExtractor()


def medicines(text: str) -> set[tuple[str, str | None, str | None]]:
    """(medicine, qualifier, the medicine it replaces) of every medicine fact the sentence states."""
    (result,) = EXTRACTOR.extract_batch([Episode(id="e", group_id=GroupId("g"), content=text, role="user",
                                                 source_message_id="m", reference_time=AT, speaker="Rosa")])
    assert not isinstance(result, Exception)
    return {(f.object, f.qualifier, f.replaces) for f in result.facts
            if canonical(f.relation, f.object)[0] == "takes_medication"}


def test_the_table_holds_medicines_one_per_condition_and_nothing_else_so() -> None:
    assert per_qualifier("takes_medication") and not one_value("takes_medication")
    assert canonical("takes")[0] == canonical("on_medication")[0] == "takes_medication"
    assert [r.name for r in RELATIONS if r.per_qualifier] == ["takes_medication"]


def test_a_medicine_being_on_for_a_condition_carries_it() -> None:
    assert medicines("I'm on ramipril for my blood pressure.") == {("ramipril", "blood pressure", None)}


def test_a_medicine_taken_for_a_condition_carries_it() -> None:
    assert medicines("I take omeprazole for reflux.") == {("omeprazole", "reflux", None)}


def test_a_medicine_put_on_by_someone_for_a_condition_carries_it() -> None:
    assert medicines("The GP put me on atorvastatin for cholesterol.") == {("atorvastatin", "cholesterol", None)}


def test_a_time_after_for_is_no_condition() -> None:
    assert medicines("I've taken metformin for three years.") == {("metformin", None, None)}


def test_a_switch_by_someone_unnamed_replaces_the_old_medicine() -> None:
    assert medicines("They switched me from ramipril to candesartan.") == {("candesartan", None, "ramipril")}


def test_a_switch_for_a_condition_replaces_and_carries_it() -> None:
    assert medicines("My consultant switched me from sertraline to mirtazapine for depression.") == {
        ("mirtazapine", "depression", "sertraline")}


def test_a_fact_sentence_says_what_the_medicine_is_for() -> None:
    (result,) = EXTRACTOR.extract_batch([Episode(id="e", group_id=GroupId("g"), content="I take omeprazole for reflux.",
                                                 role="user", source_message_id="m", reference_time=AT, speaker="Rosa")])
    assert not isinstance(result, Exception)
    assert [f.fact for f in result.facts] == ["Rosa takes omeprazole for reflux"]


def test_switching_from_one_medicine_to_another_oneself_replaces_it() -> None:
    assert medicines("I switched from ramipril to candesartan.") == {("candesartan", None, "ramipril")}


def test_a_medicine_used_is_a_medicine_taken_and_other_things_used_stay_used() -> None:
    assert medicines("I use insulin.") == {("insulin", None, None)}
    assert medicines("I switched from Chrome to Firefox.") == set()
