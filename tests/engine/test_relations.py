"""The relation table: every name an extractor gives a relation maps to one canonical relation, one way round."""

from __future__ import annotations

from mnemobus.engine.extract import ExtractedEnding, ExtractedEntity, ExtractedFact, Extraction
from mnemobus.engine.relations import RELATIONS, canonical, canonical_extraction, ender, one_value


def test_a_synonym_is_its_canonical_relation_the_same_way_round() -> None:
    assert canonical("employed_by") == ("works_at", False)


def test_a_name_said_from_the_objects_end_turns_the_fact_round() -> None:
    assert canonical("manager_of") == ("reports_to", True) and canonical("wife_of") == ("is_married_to", True)


def test_a_generic_is_with_a_diet_is_the_diet_relation() -> None:
    assert canonical("is", "Vegan") == ("diet", False) and canonical("be", "vegetarian") == ("diet", False)


def test_a_state_outside_every_row_stays_a_plain_is() -> None:
    assert canonical("is", "pregnant") == ("is", False)


def test_an_unknown_relation_is_itself_underscored() -> None:
    assert canonical("Collects Stamps") == ("collects_stamps", False)


def test_a_favourite_of_any_kind_holds_one_value_and_favorite_is_spelt_favourite() -> None:
    assert canonical("favorite_show") == ("favourite_show", False) and one_value("favourite_show")


def test_many_valued_relations_keep_every_value() -> None:
    assert not any(one_value(r) for r in ("has_pet", "speaks", "plays", "likes"))


def test_every_one_value_relation_the_brief_names_is_one_value() -> None:
    assert all(one_value(r) for r in ("lives_in", "works_at", "works_as", "is_married_to", "engaged_to",
                                      "partner_of", "reports_to", "diet", "phone", "email", "owns_car"))


def test_no_name_means_two_relations() -> None:
    names = [n for r in RELATIONS for n in (r.name, *r.synonyms, *r.inverses)]
    assert len(names) == len(set(names))


def test_an_ender_with_its_particle_is_found_by_lemma() -> None:
    row = ender("break  up")
    assert row is not None and "partner_of" in row.ends and ender("walk") is None


def test_a_symmetric_fact_is_held_by_the_speaker() -> None:
    speaker = ExtractedEntity("Lotte", "person", "user")
    fact = ExtractedFact("Kemi", "husband_of", "Lotte", "semantic", "Kemi is Lotte's husband")
    (got,) = canonical_extraction(Extraction((speaker,), (fact,))).facts
    assert (got.subject, got.relation, got.object, got.fact) == ("Lotte", "is_married_to", "Kemi",
                                                                "Kemi is Lotte's husband")


def test_an_endings_alternatives_are_canonical_too() -> None:
    e = ExtractedEnding("Lotte", "has_manager", "Gareth", "left", relations=("employed_by",))
    (got,) = canonical_extraction(Extraction((), (), (e,))).endings
    assert (got.relation, got.relations) == ("reports_to", ("works_at",))


def test_a_phone_a_generic_uses_names_is_the_one_value_phone_relation() -> None:
    assert canonical("uses", "Pixel 8") == ("uses_phone", False) and one_value("uses_phone")


def test_graduating_ends_studies_without_naming_where() -> None:
    row = ender("graduate")
    assert row is not None and row.bare and row.ends == ("studies_at",)


def test_filler_words_a_model_adds_to_a_relation_name_are_dropped() -> None:
    assert canonical("is_currently_employed_at") == ("works_at", False)
    assert canonical("lives_currently_in") == ("lives_in", False)


def test_every_name_of_a_kind_the_table_lists_is_that_kinds_one_value_uses_relation() -> None:
    from mnemobus.engine.relations import USES_KINDS

    for kind, (_, names) in USES_KINDS.items():
        for name in names:
            assert canonical("uses", name.capitalize()) == (f"uses_{kind}", False) and one_value(f"uses_{kind}")


def test_owning_or_wearing_a_named_thing_of_a_kind_is_using_it() -> None:
    assert canonical("owns", "Kindle Paperwhite") == ("uses_ereader", False)
    assert canonical("wears", "Fitbit") == ("uses_watch", False)
