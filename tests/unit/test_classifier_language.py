"""The rule classifier's language: script-based detection, weighted length, and which message it reads."""

import pytest

from switchyard.actors.routing.classify import RuleClassifier, detect_language, estimated_tokens, weighted_length

# --- detect_language ---------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "??", "123 + 456 = 579", "   \n\t", "🙂🙂"])
def test_text_without_letters_has_no_language(text):
    assert detect_language(text) is None


def test_hangul_at_a_tenth_of_the_letters_is_korean():
    assert detect_language("이 REST API의 rate limiting 로직을 구현해줘.") == "ko"
    # 1 Hangul letter in 10: still Korean; 1 in 11: not.
    assert detect_language("가abcdefghi") == "ko"
    assert detect_language("가abcdefghij") == "en"


def test_kana_at_a_tenth_of_the_letters_is_japanese():
    assert detect_language("これはペンです") == "ja"
    assert detect_language("あabcdefghi") == "ja"
    assert detect_language("あabcdefghij") == "en"


def test_han_without_kana_is_chinese():
    assert detect_language("这是一个测试句子") == "zh"


def test_han_at_a_tenth_of_the_letters_is_chinese_even_among_english_terms():
    assert detect_language("请解释一下 Kubernetes 的 pod scheduling 机制") == "zh"


def test_han_with_some_kana_is_japanese():
    # One kana among thirteen letters (below a tenth): Han decides, and any kana makes it Japanese.
    assert detect_language("日本語文章構造解析処理の例") == "ja"


def test_latin_letters_are_english():
    assert detect_language("Bonjour, comment ça va?") == "en"
    assert detect_language("What throughput is achievable here") == "en"


def test_latin_needs_half_of_the_letters():
    assert detect_language("Привет мир hello") == "und"
    assert detect_language("Привет hello world") == "en"


def test_other_scripts_are_undetermined():
    assert detect_language("Привет, как дела?") == "und"
    assert detect_language("مرحبا بالعالم") == "und"


def test_a_stray_han_character_does_not_make_english_chinese():
    assert detect_language("Explain the meaning of 道 in Taoist philosophy") == "en"


def test_hangul_wins_over_kana_when_both_reach_a_tenth():
    assert detect_language("한국어와 ひらがな") == "ko"


# --- weighted_length ---------------------------------------------------------------------

def test_latin_characters_count_one():
    assert weighted_length("abc d") == 5


def test_hangul_syllables_and_han_characters_count_two_and_a_half():
    assert weighted_length("한국어") == 7.5
    assert weighted_length("中文") == 5
    assert weighted_length("a한b") == 4.5


def test_jamo_and_kana_count_one():
    assert weighted_length("ㅋㅋ") == 2
    assert weighted_length("かな") == 2


def test_estimated_tokens_are_weighted_length_over_four_rounded_up():
    assert estimated_tokens("") == 0
    assert estimated_tokens("abcd") == 1
    assert estimated_tokens("abcde") == 2
    assert estimated_tokens("한국") == 2          # 5 / 4


# --- which message the classifier reads ------------------------------------------------------

def language_of(messages):
    return RuleClassifier().classify({"messages": messages}).language


def test_language_is_detected_in_the_last_user_message():
    assert language_of([
        {"role": "user", "content": "Tell me about the history of Rome, in detail please."},
        {"role": "assistant", "content": "Rome was founded ..."},
        {"role": "user", "content": "한국어로 다시 설명해 줄래?"},
    ]) == "ko"


def test_a_last_user_message_without_letters_takes_the_earlier_user_turns():
    assert language_of([
        {"role": "user", "content": "서울의 인구는 몇 명이야?"},
        {"role": "assistant", "content": "About ten million people."},
        {"role": "user", "content": "??"},
    ]) == "ko"


def test_no_letters_in_any_user_message_is_no_language():
    assert language_of([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "1 + 1 = ?"},
        {"role": "assistant", "content": "It is two."},
        {"role": "user", "content": "??"},
    ]) is None


def test_system_and_assistant_text_does_not_decide_the_language():
    assert language_of([
        {"role": "system", "content": "항상 한국어로 친절하게 대답하세요."},
        {"role": "user", "content": "What is the boiling point of water?"},
        {"role": "assistant", "content": "섭씨 100도입니다."},
    ]) == "en"


def test_code_fences_do_not_hide_a_korean_question():
    listing = "```python\n" + "def add(first_value, second_value):\n    return first_value + second_value\n" * 5 + "```"
    assert language_of([{"role": "user", "content": listing + "\n이 함수가 왜 느린지 알려줘"}]) == "ko"


def test_a_message_of_code_only_is_detected_in_the_code():
    assert language_of([{"role": "user", "content": "```\nprint('hello world')\n```"}]) == "en"


def test_text_parts_are_read_and_image_parts_skipped():
    assert language_of([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "이 사진에 무엇이 있나요?"},
    ]}]) == "ko"
