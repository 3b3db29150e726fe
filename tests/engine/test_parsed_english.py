"""More of English for the offline extractor (issue 35): ways people say the same facts that no rule was written
from. Sentences of this file's own; none is from a labelled or held-out set."""

from __future__ import annotations

from datetime import UTC, datetime

from mnemobus.engine.extract_parse import ParsedExtractor
from mnemobus.shared.groups import GroupId
from mnemobus.store.model import Episode

AT = datetime(2026, 6, 15, 12, tzinfo=UTC)  # a Monday
EXTRACTOR = ParsedExtractor()


def read(text: str):  # type: ignore[no-untyped-def]
    (result,) = EXTRACTOR.extract_batch([Episode(id="e", group_id=GroupId("g"), content=text, role="user",
                                                 source_message_id="m", reference_time=AT, speaker="Rosa")])
    assert not isinstance(result, Exception)
    return result


def triples(text: str) -> set[tuple[str, str, str]]:
    return {(f.subject, f.relation, f.object) for f in read(text).facts}


def dated(text: str) -> dict[tuple[str, str, str], datetime | None]:
    return {(f.subject, f.relation, f.object): f.valid_from for f in read(text).facts}


def test_a_relatives_name_said_as_a_name_and_what_she_does_after_it() -> None:
    assert triples("My husband's name is Idris, he's a plumber in Derby.") >= {
        ("Idris", "husband_of", "Rosa"), ("Idris", "works_as", "plumber")}


def test_an_apposition_names_the_relative_between_commas() -> None:
    assert triples("Jonas, my boyfriend, teaches maths.") >= {("Jonas", "boyfriend_of", "Rosa")}


def test_a_place_that_is_home_now_is_where_the_speaker_lives() -> None:
    assert triples("Bristol is home now.") == {("Rosa", "lives_in", "Bristol")}


def test_home_said_first_is_the_same_fact() -> None:
    assert triples("Home is Galway these days.") == {("Rosa", "lives_in", "Galway")}


def test_having_been_somewhere_since_a_year_is_living_there_since_then() -> None:
    assert dated("We've been in Utrecht since 2019.") == {
        ("Rosa", "lives_in", "Utrecht"): datetime(2019, 1, 1, tzinfo=UTC)}


def test_being_on_a_medicine_is_taking_it() -> None:
    assert triples("I'm on lisinopril.") == {("Rosa", "takes", "lisinopril")}


def test_being_on_holiday_takes_nothing() -> None:
    assert triples("I'm on holiday.") == set()


def test_being_at_a_company_now_is_working_there() -> None:
    assert triples("I'm at Deloitte now.") == {("Rosa", "works_at", "Deloitte")}


def test_a_time_word_after_a_relatives_name_is_never_the_name() -> None:
    assert triples("My nephew Arlo calls most Fridays from Perth.") >= {("Arlo", "nephew_of", "Rosa")}
    assert not any(s in ("Fridays", "Friday") for s, _, _ in triples("My nephew Arlo calls most Fridays from Perth."))


def test_years_spent_at_a_firm_before_another_are_past_not_present() -> None:
    result = read("Before Spotify I spent four years at Unilever.")
    assert result.facts == ()
    assert [(e.relation, e.object, e.fact) for e in result.endings] == [
        ("works_at", "Unilever", "Rosa used to work at Unilever")]


def test_years_spent_at_a_firm_until_now_hold_since_they_began() -> None:
    assert dated("I've spent two years at Monzo.") == {("Rosa", "works_at", "Monzo"): datetime(2024, 6, 15, tzinfo=UTC)}


def test_a_new_job_got_last_week_is_working_there_since() -> None:
    assert dated("I got a new job at Bosch last week.") == {("Rosa", "works_at", "Bosch"): datetime(2026, 6, 8,
                                                                                                      tzinfo=UTC)}


def test_a_dropped_i_before_a_past_verb_the_tagger_read_as_bare_is_still_the_speaker() -> None:
    assert triples("Got a new job at Lidl.") == {("Rosa", "works_at", "Lidl")}


def test_a_state_held_for_years_began_that_long_ago() -> None:
    assert dated("I've been vegetarian for five years.") == {
        ("Rosa", "is", "vegetarian"): datetime(2021, 6, 16, tzinfo=UTC)}


def test_a_weekday_told_in_the_past_is_the_last_one() -> None:
    assert list(dated("I went to a gig on Saturday.").values()) == [datetime(2026, 6, 13, tzinfo=UTC)]


def test_a_partner_one_has_got_called_by_name_is_the_partner() -> None:
    assert triples("I've got a boyfriend called Theo.") == {("Theo", "boyfriend_of", "Rosa")}


def test_a_course_planned_for_next_year_is_a_plan_held_now_that_names_its_year() -> None:
    (fact,) = read("I'm starting a master's next year.").facts
    assert (fact.relation, fact.object, fact.valid_from) == ("plans_to_study", "master", None)
    assert fact.fact == "Rosa plans to study master (2027-01-01)"


def test_a_course_being_done_now_is_studied() -> None:
    assert triples("I'm doing an MBA.") == {("Rosa", "studies", "MBA")}


def endings(text: str) -> set[tuple[str, str | None, tuple[str, ...]]]:
    return {(e.relation, e.object, e.relations) for e in read(text).endings}


def test_getting_married_to_someone_is_being_married_to_them() -> None:
    assert triples("I got married to Omar in April.") == {("Rosa", "is_married_to", "Omar")}


def test_two_people_marrying_together_said_with_the_other_first() -> None:
    assert triples("Omar and I got married last year.") == {("Rosa", "is_married_to", "Omar")}


def test_being_left_by_someone_ends_whatever_tie_held_them() -> None:
    (ending,) = read("Ivo dumped me.").endings
    assert (ending.subject, ending.relation, ending.object) == ("Rosa", "partner_of", "Ivo")


def test_losing_a_named_pet_ends_whichever_relation_holds_it() -> None:
    assert any(obj == "Mopsy" and "has_pet" in others for _, obj, others in
               endings("We lost our rabbit Mopsy in May."))


def test_handing_in_ones_notice_at_a_firm_ends_the_job_there() -> None:
    assert {(r, o) for r, o, _ in endings("I handed in my notice at Asda.")} == {("works_at", "Asda")}


def test_not_drinking_any_more_ends_the_drinking_habit() -> None:
    assert {(r, o) for r, o, _ in endings("I don't drink any more.")} == {("drinks", None)}


def test_the_car_someone_drives_is_the_one_value_car_relation() -> None:
    assert triples("I drive a Fiat now.") == {("Rosa", "owns_car", "Fiat")}


def test_being_based_somewhere_is_living_there() -> None:
    assert triples("We're based in Cardiff these days.") == {("Rosa", "lives_in", "Cardiff")}


def test_being_with_a_company_now_is_working_there() -> None:
    assert triples("I'm with Accenture now.") == {("Rosa", "works_at", "Accenture")}


def test_having_been_at_a_firm_for_years_is_working_there_since() -> None:
    assert dated("I've been at Accenture for two years.") == {
        ("Rosa", "works_at", "Accenture"): datetime(2024, 6, 15, tzinfo=UTC)}


def test_an_other_half_named_between_commas_is_the_partner_and_the_subject() -> None:
    assert triples("My other half, Kit, is a nurse.") == {("Kit", "partner_of", "Rosa"), ("Kit", "works_as", "nurse")}


def test_two_people_dating_since_a_year_are_partners_since() -> None:
    assert dated("Kit and I have dated since 2020.") == {("Rosa", "partner_of", "Kit"): datetime(2020, 1, 1, tzinfo=UTC)}


def test_two_people_together_now_are_partners() -> None:
    assert triples("Kit and I are together now.") == {("Rosa", "partner_of", "Kit")}


def test_an_allergy_the_tagger_read_as_an_infinitive_is_still_an_allergy() -> None:
    assert triples("I'm allergic to shellfish.") == {("Rosa", "allergic_to", "shellfish")}


def test_membership_said_with_a_noun_is_membership() -> None:
    assert triples("I'm a member of the chess club.") == {("Rosa", "member_of", "chess club")}


def test_going_vegetarian_is_being_vegetarian_from_then() -> None:
    assert dated("I went vegetarian in March.") == {("Rosa", "is", "vegetarian"): datetime(2026, 3, 1, tzinfo=UTC)}


def test_a_phone_number_and_an_email_are_contact_facts() -> None:
    assert triples("My phone number is 0161 496 0000.") == {("Rosa", "phone", "0161 496 0000")}
    assert triples("My email is rosa@example.org.") == {("Rosa", "email", "rosa@example.org")}


def test_a_baby_due_later_is_expected_now() -> None:
    (fact,) = read("We're expecting a baby in November.").facts
    assert (fact.relation, fact.object, fact.valid_from) == ("expecting", "baby", None)


def test_what_the_speaker_and_another_do_is_said_of_both() -> None:
    assert ("Rosa", "lives_in", "Sligo") in triples("My brother and I live in Sligo.")


def test_two_people_said_to_be_married_are_married_to_each_other() -> None:
    assert triples("Omar and I are married.") == {("Rosa", "is_married_to", "Omar")}


def test_a_denied_copula_ends_what_it_would_have_stated() -> None:
    assert {(r, o) for r, o, _ in endings("I'm not with Accenture any more.")} == {("works_at", "Accenture")}


def test_two_people_no_longer_together_end_their_partnership() -> None:
    assert {(r, o) for r, o, _ in endings("Kit and I aren't together any more.")} == {("partner_of", "Kit")}


def test_an_ex_is_no_longer_a_partner_or_spouse() -> None:
    assert ("partner_of", "Ivo", ("is_married_to", "engaged_to")) in endings("Ivo is my ex now.")


def test_being_single_ends_any_partner() -> None:
    assert ("partner_of", None) in {(r, o) for r, o, _ in endings("I'm single now.")}


def test_seeing_someone_is_dating_them() -> None:
    assert triples("I'm seeing Ivo.") == {("Rosa", "partner_of", "Ivo")}


def test_a_dropped_im_before_an_ongoing_verb_states_the_lasting_fact() -> None:
    assert triples("Living in Swansea these days.") == {("Rosa", "lives_in", "Swansea")}
    assert triples("Working at Siemens now.") == {("Rosa", "works_at", "Siemens")}


def test_a_dropped_im_before_going_somewhere_next_week_is_a_plan_not_a_visit() -> None:
    assert triples("Going to Porto next week.") == {("Rosa", "plans_to_visit", "Porto")}


def test_a_dropped_ive_before_been_at_a_firm_since_a_month_is_working_there_since() -> None:
    assert dated("Been at Siemens since March.") == {("Rosa", "works_at", "Siemens"): datetime(2026, 3, 1, tzinfo=UTC)}


def test_a_thing_of_the_speakers_named_by_a_copula_is_its_relation() -> None:
    assert triples("My employer is Centrica.") == {("Rosa", "works_at", "Centrica")}
    assert triples("My car is a Saab.") == {("Rosa", "owns_car", "Saab")}


def test_a_thing_of_the_speakers_described_by_an_adjective_or_a_feeling_states_nothing() -> None:
    assert triples("My company is tiny.") == set() and triples("My job is a nightmare.") == set()


def test_a_place_said_to_be_where_the_speaker_lives_or_works() -> None:
    assert triples("Centrica is where I work.") == {("Rosa", "works_at", "Centrica")}
    assert triples("Bangor is where I live.") == {("Rosa", "lives_in", "Bangor")}


def test_being_employed_by_a_firm_is_working_there() -> None:
    assert triples("I'm employed by Centrica.") == {("Rosa", "works_at", "Centrica")}


def test_a_named_animal_said_to_be_our_dog_is_a_pet() -> None:
    assert triples("Mabel is our dog.") == {("Rosa", "has_pet", "Mabel"), ("Mabel", "is_a", "dog")}


def test_suffering_from_a_condition_is_having_it() -> None:
    assert triples("I suffer from eczema.") == {("Rosa", "has_condition", "eczema")}


def test_an_intolerance_keeps_what_one_is_intolerant_of() -> None:
    assert triples("I'm lactose intolerant.") == {("Rosa", "is", "lactose intolerant")}


def test_she_on_a_later_line_is_the_person_an_earlier_line_named() -> None:
    assert ("Ana", "works_at", "Equinor") in triples("My sister Ana moved to Oslo.\nShe works at Equinor now.")


def test_she_in_the_next_turn_of_the_conversation_is_the_person_the_turn_before_named() -> None:
    turns = [Episode(id=f"e{n}", group_id=GroupId("g"), content=text, role="user", source_message_id=f"m{n}",
                     reference_time=AT, speaker="Rosa")
             for n, text in enumerate(["My cousin Ines lives in Faro.", "She teaches chemistry."])]
    _, second = EXTRACTOR.extract_batch(turns)
    assert not isinstance(second, Exception)
    assert {(f.subject, f.relation, f.object) for f in second.facts} == {("Ines", "teaches", "chemistry")}


def test_a_thing_of_a_kind_named_by_a_copula_is_what_the_speaker_uses_of_that_kind() -> None:
    assert triples("My browser is Firefox.") == {("Rosa", "uses_browser", "Firefox")}
    assert triples("My laptop is a ThinkPad.") == {("Rosa", "uses_laptop", "ThinkPad")}


def test_a_phone_named_by_a_copula_is_the_phone_not_its_number() -> None:
    assert triples("My phone is a Pixel.") == {("Rosa", "uses_phone", "Pixel")}
    assert triples("My phone number is 07700 900123.") == {("Rosa", "phone", "07700 900123")}


def test_starting_at_a_firm_is_working_there_since_that_day() -> None:
    assert dated("I started at Ocado last week.") == {("Rosa", "works_at", "Ocado"): datetime(2026, 6, 8, tzinfo=UTC)}


def test_a_dropped_i_before_starting_at_a_firm_is_still_the_speaker() -> None:
    assert triples("Started at Ocado last week.") == {("Rosa", "works_at", "Ocado")}


def test_starting_at_a_time_or_at_home_is_no_job() -> None:
    assert not any(r == "works_at" for _, r, _ in triples("I started at 9 today.") | triples("I started at home."))


def test_my_job_at_a_firm_is_working_there_whatever_the_verb_says_of_it() -> None:
    for text in ("Love my new job at Arup.", "My job at Arup is great.", "I don't like my job at Arup."):
        assert ("Rosa", "works_at", "Arup") in triples(text), text


def test_a_job_at_a_firm_that_is_old_quit_or_to_come_is_not_held() -> None:
    for text in ("My old job at Aldi was boring.", "I quit my job at Aldi.", "My new job at Arup starts next Monday."):
        assert not any(r == "works_at" for _, r, _ in triples(text)), text


def test_a_pets_name_said_as_a_name_is_the_pet() -> None:
    assert triples("Our cat's name is Miso.") == {("Rosa", "has_pet", "Miso"), ("Miso", "is_a", "cat")}


def test_a_name_with_a_relative_between_commas_is_a_person_whatever_the_copula_says_of_them() -> None:
    assert triples("Hana, my fiancée, is a dentist.") == {("Hana", "fiance_of", "Rosa"), ("Hana", "works_as", "dentist")}


def test_a_name_the_tagger_read_as_a_noun_at_the_start_still_takes_its_apposition() -> None:
    assert {("Tomasz", "brother_of", "Rosa"), ("Tomasz", "works_as", "chef")} <= triples(
        "Tomasz, my brother, is a chef in Leeds.")


def test_a_capitalised_word_with_no_relative_beside_it_is_no_person() -> None:
    assert triples("Dinner, my favourite meal, is late today.") == set()


def test_getting_engaged_to_someone_is_being_engaged_to_them_not_a_state() -> None:
    assert triples("I got engaged to Marco.") == {("Rosa", "engaged_to", "Marco")}


def test_a_medicine_someone_put_the_speaker_on_is_taken_from_then() -> None:
    assert dated("The doctor put me on metformin last month.") == {
        ("Rosa", "takes", "metformin"): datetime(2026, 5, 16, tzinfo=UTC)}
    assert triples("My GP switched me to citalopram.") == {("Rosa", "takes", "citalopram")}


def test_being_put_on_a_rota_or_a_medicine_maybe_takes_nothing() -> None:
    assert triples("He put me on the rota.") == set() and triples("The doctor might put me on statins.") == set()


def test_no_longer_engaged_to_someone_ends_the_engagement() -> None:
    assert [(e.relation, e.object) for e in read("I'm no longer engaged to Marco.").endings] == [("engaged_to", "Marco")]


def test_not_at_a_firm_any_more_ends_the_job_there_and_not_today_ends_nothing() -> None:
    assert [(e.relation, e.object) for e in read("I'm not at Arup anymore.").endings] == [("works_at", "Arup")]
    assert read("I'm not at Arup today.").endings == ()


def test_a_verb_the_parser_lemmatises_wrongly_is_read_by_its_true_lemma() -> None:
    assert ("Rosa", "dislikes", "commute") in triples("I really hate my commute, and I hated it last winter too.") \
        and ("Rosa", "dislikes", "album") in triples("I hated that new album.")


def test_a_verb_named_as_the_relation_takes_its_true_lemma() -> None:
    assert {rel for _, rel, _ in triples("My brother rides horses.")} == {"rides"}


def test_a_state_the_parser_takes_for_a_passive_verb_is_still_denied() -> None:
    assert [(e.relation, e.object) for e in read("I'm not vegan any more.").endings] == [("is", "vegan")]


def test_a_dropped_im_before_a_state_is_restored() -> None:
    assert [(e.relation, e.object) for e in read("No longer vegetarian, since you ask.").endings] == [
        ("is", "vegetarian")]


def test_a_fragment_that_is_only_talk_states_nothing() -> None:
    assert read("Not bad. Still raining here. No idea.").statements == 0
