"""The rule classifier's keyword tables and matching rules (actors/routing/classify/keywords.py)."""

from types import MappingProxyType

import pytest

from switchyard.actors.routing.classify.keyword_tables import BUILTIN
from switchyard.actors.routing.classify.keywords import KeywordSet, Scanned, build_tables, table_for
from switchyard.config.smart_routing import KEYWORD_CATEGORIES


def found(entry: str, text: str) -> bool:
    return bool(KeywordSet.of([entry]).matches(Scanned(text)))


# --- one-word entries ------------------------------------------------------------------------

def test_single_word_entry_matches_as_a_substring():
    assert found("요약", "이 글을 요약해줘")
    assert found("poem", "Write two poems about rain")


def test_matching_ignores_case():
    assert found("poem", "A POEM, please")
    assert found("write a story", "WRITE A SHORT STORY")


# --- multi-word entries --------------------------------------------------------------------

def test_multi_word_entry_allows_up_to_two_tokens_between_words():
    assert found("write a story", "Write a short story about a fox")
    assert found("write a story", "write a very short story")
    assert not found("write a story", "write a very very short story")


def test_korean_multi_word_entry_gaps_and_its_last_word_runs_on():
    assert found("시를 써", "시를 하나 써줘")


def test_words_must_come_in_order():
    assert not found("write a story", "a story to write")


def test_sentence_end_closes_the_match():
    for text in ("Write a. Story", "Write a! story", "Write a? story", "Write a\nstory", "Write a。story"):
        assert not found("write a story", text), text


def test_a_dot_inside_a_token_does_not_end_the_sentence():
    assert found("write a story", "Write a v1.2 story")


def test_each_word_must_equal_a_whole_token():
    assert not found("write a story", "rewrite a story")
    assert not found("write a story", "write a history")


def test_punctuation_at_token_ends_is_stripped():
    assert found("write a story", "Write a (short) \"story\"!")


def test_last_word_ending_in_a_non_latin_letter_may_run_on_within_its_token():
    assert found("써", "써줘") and found("시를 써", "시를 써줘")
    assert found("시 한 편", "시 한 편을 써 줘")


def test_earlier_words_never_run_on():
    assert not found("시 한 편", "시스템 한 편")


def test_latin_last_words_never_run_on():
    assert not found("write a story", "write a storyline")
    assert not found("rate limit", "rate limiting")


def test_markers_bounded_by_function_words_match_only_adjacent():
    assert not found("once upon", "Once agreed upon, the schema is frozen")
    assert found("once upon", "Once upon a time there was a fox")
    assert not found("what is", "What throughput is achievable here")
    assert found("what is", "What is a REST API?")


def test_only_the_outer_words_decide_adjacency():
    assert found("write a story", "write a short story")


def test_matches_count_distinct_entries():
    entries = KeywordSet.of(["poem", "poetry", "write a story"])
    assert entries.matches(Scanned("A poem, another poem, and poetry.")) == {"poem", "poetry"}


# --- built-in tables -----------------------------------------------------------------------

@pytest.mark.parametrize("language", sorted(BUILTIN))
def test_no_one_word_entry_is_inside_another_of_its_category(language):
    """Else one word of the text would count as two distinct keywords."""
    table = build_tables({})[language]
    for category in KEYWORD_CATEGORIES:
        singles = table[category].singles
        entries = singles + tuple(p.entry for p in table[category].phrases)
        overlaps = [(a, b) for a in singles for b in entries if a != b and a in b]
        assert overlaps == [], f"{language}.{category}"


def test_every_category_has_built_in_entries():
    for language, table in build_tables({}).items():
        for category in KEYWORD_CATEGORIES:
            assert table[category].singles or table[category].phrases, f"{language}.{category}"


def test_built_in_entries_are_lower_case():
    for table in BUILTIN.values():
        for entries in table.values():
            assert all(e == e.lower() for e in entries)


def test_korean_table_includes_the_english_keywords():
    tables = build_tables({})
    for category in KEYWORD_CATEGORIES:
        assert set(tables["en"][category].singles) <= set(tables["ko"][category].singles)
        assert set(tables["en"][category].phrases) <= set(tables["ko"][category].phrases)
    assert "분석" in tables["ko"]["analysis"].singles and "분석" not in tables["en"]["analysis"].singles


# --- configured keywords and table choice --------------------------------------------------------

def extra(**tables):
    return MappingProxyType({lang: MappingProxyType(t) for lang, t in tables.items()})


def test_configured_keywords_add_to_the_built_in_tables():
    tables = build_tables(extra(ko={"complex": ("커널 스케줄러",), "code": ("배포", "헬름 차트")}))
    ko = tables["ko"]
    assert ko["complex"].matches(Scanned("커널 스케줄러의 동작을 최적화해줘")) == {"커널 스케줄러", "최적화"}
    assert ko["code"].matches(Scanned("헬름 차트로 배포하는 방법")) == {"배포", "헬름 차트"}


def test_configured_english_keywords_reach_every_table():
    tables = build_tables(extra(en={"complex": ("kernel scheduler",)}))
    assert tables["ko"]["complex"].matches(Scanned("kernel scheduler 설명해줘")) == {"kernel scheduler"}


def test_an_unknown_language_gets_a_new_table_on_top_of_english():
    tables = build_tables(extra(fr={"creative": ("poème",)}))
    assert tables["fr"]["creative"].matches(Scanned("un poème et un poem")) == {"poème", "poem"}
    assert "poème" not in tables["en"]["creative"].singles


def test_latin_text_uses_the_primary_language_table():
    tables = build_tables(extra(fr={"creative": ("poème",)}))
    assert table_for(tables, "en", "fr") is tables["fr"]
    assert table_for(tables, "en", None) is tables["en"]


def test_detected_korean_japanese_and_chinese_are_never_overridden():
    tables = build_tables(extra(fr={"creative": ("poème",)}))
    assert table_for(tables, "ko", "fr") is tables["ko"]
    assert table_for(tables, "ja", "fr") is tables["en"]       # no Japanese table: English
    assert table_for(tables, "zh", "fr") is tables["en"]


def test_latin_text_in_a_korean_deployment_uses_the_english_table():
    tables = build_tables({})
    assert table_for(tables, "en", "ko") is tables["en"]


def test_a_language_without_a_table_uses_english():
    tables = build_tables({})
    assert table_for(tables, "en", "de") is tables["en"]
    assert table_for(tables, None, None) is tables["en"]
