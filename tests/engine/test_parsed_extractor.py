"""The offline parser extractor on ordinary talk (none of these sentences is in the labelled set)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.engine.when import resolve
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode

AT = datetime(2026, 6, 15, 12, tzinfo=UTC)  # a Monday
EXTRACTOR = ParsedExtractor()


def read(text: str, *, speaker: str | None = "Dana", role: str = "user"):  # type: ignore[no-untyped-def]
    episode = Episode(id="e", group_id=GroupId("g"), content=text, role=role, source_message_id="m",
                      reference_time=AT, speaker=speaker)
    (result,) = EXTRACTOR.extract_batch([episode])
    assert not isinstance(result, Exception)
    return result


def triples(text: str, **kw: str | None) -> set[tuple[str, str, str]]:
    return {(f.subject, f.relation, f.object) for f in read(text, **kw).facts}


def test_a_relative_named_in_passing_is_their_own_entity_with_the_kinship() -> None:
    assert triples("My cousin Priti lives in Leicester.") == {("Priti", "cousin_of", "Dana"),
                                                              ("Priti", "lives_in", "Leicester")}


def test_first_person_is_the_speaker_by_name() -> None:
    assert triples("I teach piano at a music school.") == {("Dana", "teaches", "piano"),
                                                          ("Dana", "works_at", "music school")}


def test_a_pet_called_by_name_is_a_pet_with_its_kind() -> None:
    facts = {(f.subject, f.relation, f.object): f for f in read("We got a puppy named Olive last month.").facts}
    assert set(facts) == {("Dana", "has_pet", "Olive"), ("Olive", "is_a", "puppy")}
    assert facts[("Dana", "has_pet", "Olive")].object_type == "pet"
    assert facts[("Dana", "has_pet", "Olive")].valid_from == datetime(2026, 5, 16, tzinfo=UTC)


def test_not_any_more_ends_the_fact_with_its_cause() -> None:
    result = read("I'm not working at the bakery anymore.")
    assert result.facts == () and [(e.relation, e.object, e.cause) for e in result.endings] == [
        ("works_at", "bakery", "no longer")]


def test_working_from_home_on_a_weekday_names_no_employer() -> None:
    assert triples("I work from home on Tuesdays.") == set()


def test_used_to_records_the_past_not_the_present() -> None:
    result = read("I used to play the trumpet.")
    assert result.facts == () and [(e.relation, e.object, e.fact) for e in result.endings] == [
        ("plays", "trumpet", "Dana used to play trumpet")]


def test_an_assistants_words_are_not_facts_about_anyone() -> None:
    assert read("I live on a server in Frankfurt.", speaker=None, role="assistant").facts == ()


def test_a_question_or_a_wish_states_nothing() -> None:
    assert triples("Should I move to Lisbon?") == set() and triples("If I had a dog I would call it Pip.") == set()


def test_a_dated_move_takes_effect_on_its_date() -> None:
    (fact,) = read("I moved to Lyon on 3 March.").facts
    assert (fact.relation, fact.object, fact.valid_from) == ("lives_in", "Lyon", datetime(2026, 3, 3, tzinfo=UTC))


def test_a_planned_move_takes_effect_when_planned() -> None:
    (fact,) = read("I'm moving to Oslo next quarter.").facts
    assert (fact.relation, fact.object, fact.valid_from) == ("lives_in", "Oslo", datetime(2026, 7, 1, tzinfo=UTC))


def test_a_friend_and_a_country_of_one_name_get_different_types() -> None:
    (friend,) = read("My friend Jordan is from Leeds.").facts[:1]
    (trip,) = read("I flew to Jordan in May.").facts
    assert (friend.subject, friend.subject_type) == ("Jordan", "person")
    assert (trip.relation, trip.object, trip.object_type) == ("visited", "Jordan", "place")


def test_transcript_lines_are_read_as_their_speakers() -> None:
    assert triples("Sam: I play the cello.\nLee: I play the oboe.", speaker=None) == {
        ("Sam", "plays", "cello"), ("Lee", "plays", "oboe")}


@pytest.mark.parametrize(("phrase", "future", "want"), [
    ("in 2019", False, datetime(2019, 1, 1, tzinfo=UTC)),
    ("in March", False, datetime(2026, 3, 1, tzinfo=UTC)),
    ("in September", False, datetime(2025, 9, 1, tzinfo=UTC)),
    ("in September", True, datetime(2026, 9, 1, tzinfo=UTC)),
    ("on 14 June", False, datetime(2026, 6, 14, tzinfo=UTC)),
    ("next quarter", True, datetime(2026, 7, 1, tzinfo=UTC)),
    ("yesterday", False, datetime(2026, 6, 14, tzinfo=UTC)),
    ("two weeks ago", False, datetime(2026, 6, 1, tzinfo=UTC)),
    ("last Friday", False, datetime(2026, 6, 12, tzinfo=UTC)),
])
def test_time_phrases_resolve_against_the_message_time(phrase: str, future: bool, want: datetime) -> None:
    assert resolve(f"it happened {phrase}", AT, future=future) == want


def test_a_habit_on_a_weekday_is_no_date() -> None:
    assert resolve("I swim on Fridays", AT) is None


def test_going_to_an_occasion_is_a_plan_to_attend_it_with_its_time() -> None:
    facts = read("I'm going to a jazz concert next Friday.").facts
    assert [(f.subject, f.relation, f.object, f.object_type) for f in facts] == [
        ("Dana", "plans_to_attend", "jazz concert", "event")]
    when = resolve("next Friday", AT, future=True)  # a plan held now, for then
    assert facts[0].valid_from is None and facts[0].fact.endswith(f"({when:%Y-%m-%d})")


def test_going_to_a_room_is_no_plan_to_attend() -> None:
    assert not any(f.relation == "plans_to_attend" for f in read("I'm going to the kitchen.").facts)


def test_starting_a_thing_is_an_event() -> None:
    assert ("Dana", "start", "bakery") in triples("I started my own bakery last year.")


def test_a_dropped_i_before_a_past_verb_is_the_speaker() -> None:
    assert triples("Been to Rome twice.") == {("Dana", "visited", "Rome")}


def test_an_imperative_or_a_present_without_a_subject_is_nobody_s_fact() -> None:
    assert triples("Keep going and chase your dreams!") == set()
    assert triples("Sounds great.") == set()


def test_the_occasion_a_relative_clause_went_to_is_the_object() -> None:
    facts = read("One special memory for me was this pride parade I went to a few weeks ago.").facts
    assert [(f.subject, f.relation, f.object, f.object_type) for f in facts] == [
        ("Dana", "go_to", "pride parade", "event")]
    assert facts[0].valid_from == resolve("a few weeks ago", AT, future=False)


def test_going_out_for_an_activity_is_an_event_with_its_time() -> None:
    facts = read("I went hiking last week and got into a bad spot.").facts
    assert [(f.relation, f.object, f.object_type, f.fact) for f in facts] == [
        ("go", "hiking", "activity", "Dana went hiking")]
    assert facts[0].valid_from == resolve("last week", AT, future=False)


def test_a_lead_verb_tells_when_the_inner_deed_was_done() -> None:
    facts = read("On Sunday I chose to go to pottery classes.").facts
    assert [(f.relation, f.object, f.fact) for f in facts] == [
        ("go_to", "pottery classes", "Dana chose to go to pottery classes")]
    assert facts[0].valid_from == resolve("on Sunday", AT, past=True) == datetime(2026, 6, 14, tzinfo=UTC)


def test_having_an_occasion_is_an_event_that_keeps_its_purpose() -> None:
    facts = read("I had an audition for a jazz band yesterday!").facts
    assert [(f.relation, f.object, f.fact) for f in facts] == [
        ("have", "audition", "Dana had audition for jazz band")]


def test_being_at_an_occasion_is_attending_it() -> None:
    assert triples("I was at a jazz gig on Saturday.") == {("Dana", "attended", "jazz gig")}


def test_a_habit_with_a_thing_is_a_lasting_fact() -> None:
    facts = read("I mentor a transgender teen.").facts
    assert [(f.relation, f.object, f.edge_type, f.fact) for f in facts] == [
        ("mentors", "transgender teen", "semantic", "Dana mentors transgender teen")]


def test_a_light_verb_names_no_habit() -> None:
    assert triples("I make sure to call her every day.") == set()
    assert triples("We keep it simple.") == set()


def test_an_aim_is_kept_but_not_a_light_one() -> None:
    assert triples("I hope to build my own family.") == {("Dana", "hopes_to_build", "family")}
    assert triples("I want to be brave for my family.") == set()


def test_looking_into_a_thing_is_considering_it() -> None:
    assert triples("Lately, I've been looking into counseling as a career.") == {("Dana", "considering", "counseling")}


def test_who_the_speaker_says_they_are_is_kept_without_praise() -> None:
    assert triples("I'm a transgender woman.") == {("Dana", "is", "transgender woman")}
    assert triples("I'm a lucky man.") == set()


def test_a_thing_that_starts_doing_something_likes_nothing() -> None:
    assert not any(f.relation == "likes" for f in read("Can't wait till my studio starts welcoming dancers!").facts)


def test_an_object_the_parser_reads_as_the_subject_of_to_is_still_the_object() -> None:
    assert ("Dana", "make", "glass window") in triples("I made this stained glass window to remind myself of home.")


def test_a_pets_kind_keeps_the_words_that_make_it() -> None:
    assert ("Oscar", "is_a", "guinea pig") in triples("I have a guinea pig called Oscar.")


def test_what_the_speaker_holds_dear_is_a_value() -> None:
    assert triples("Self-care is really important to me.") == {("Dana", "values", "self-care")}
    assert triples("My family means the world to me.") == {("Dana", "values", "family")}


def test_thanks_or_one_particular_thing_is_no_value() -> None:
    assert triples("Your support means a lot to me.") == set()
    assert triples("The meeting is important.") == set()


def test_taking_someone_somewhere_is_an_outing_not_a_habit() -> None:
    facts = read("Yesterday I took the kids to the museum.").facts
    assert [(f.relation, f.object, f.fact) for f in facts] == [("take", "kids", "Dana took kids to museum")]
    assert triples("I take insulin twice a day.") == {("Dana", "takes", "insulin")}


def test_which_in_a_relative_clause_is_the_noun_it_describes() -> None:
    assert triples("I had to take a break from pottery, which I use for peace.") >= {("Dana", "uses", "pottery")}


def test_a_perfect_is_told_as_one() -> None:
    assert [f.fact for f in read("I keep thinking about the paths I've taken.").facts] == ["Dana has taken paths"]


def test_a_lone_word_or_a_preposition_is_no_object() -> None:
    assert triples("Yeah, I love to.") == set()


def test_a_clause_joined_by_and_happened_when_the_first_did() -> None:
    facts = read("Last month I got hurt and had to take a break from pottery.").facts
    assert [(f.fact, f.valid_from) for f in facts] == [
        ("Dana had to take break from pottery", resolve("last month", AT, future=False))]
