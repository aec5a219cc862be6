"""The rule classifier (actors/routing/classify): scope, score ceilings, proof floor, domain, confidence."""

import time
from types import MappingProxyType

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from switchyard.actors.routing.classification import Classification
from switchyard.actors.routing.classify import SIGNALS, RuleClassifier, estimated_tokens
from switchyard.actors.routing.classify.markup import has_math
from switchyard.config.smart_routing import RuleSettings

RULE = RuleClassifier()
FOUR_COMPLEX = "architecture distributed consensus byzantine"      # four distinct complex keywords
THREE_COMPLEX = "architecture distributed consensus"
MATH = r"$\frac{a}{b} \leq \sum_i x_i$"
FENCE = "```\nx = 1\n```"


def user(text: str, **fields) -> dict:
    return {"messages": [{"role": "user", "content": text}], **fields}


def classify(payload: dict, settings: RuleSettings | None = None) -> Classification:
    return (RuleClassifier(settings) if settings else RULE).classify(payload)


def padded(text: str, tokens: int, word: str = " zebra") -> str:
    """``text`` padded with ``word``, which no table knows, to ``tokens`` estimated tokens."""
    out = text + "."
    while estimated_tokens(out) < tokens - 2:
        out += word
    while estimated_tokens(out) < tokens:
        out += "z"
    assert estimated_tokens(out) == tokens
    return out


# --- signals -------------------------------------------------------------------------------

def test_there_are_exactly_eleven_named_signals():
    assert SIGNALS == ("complexity_keywords", "code_blocks", "inline_code", "math_notation", "code_intent",
                       "creative_markers", "analysis_markers", "translation_intent", "system_prompt",
                       "tool_definitions", "multilingual")


def test_fired_signals_are_named_in_their_canonical_order():
    found = classify({"messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Write a poem comparing `map` and a distributed 분산 시스템"},
    ], "tools": [{"type": "function"}]})
    assert found.signals == ("complexity_keywords", "inline_code", "creative_markers", "analysis_markers",
                             "system_prompt", "tool_definitions")


def test_message_length_always_counts_but_is_not_a_signal():
    found = classify(user("zebra"))
    assert found.signals == () and found.score == pytest.approx(0.25)


# --- scope ---------------------------------------------------------------------------------

def test_earlier_turns_add_nothing():
    alone = classify(user("Thanks, now do the same for the whole file"))
    earlier = classify({"messages": [
        {"role": "user", "content": f"{FOUR_COMPLEX} {MATH} {FENCE} write a poem and analyze it"},
        {"role": "assistant", "content": "```python\nprint(1)\n``` translated, analyzed, compared"},
        {"role": "user", "content": "Thanks, now do the same for the whole file"},
    ]})
    assert (earlier.score, earlier.signals, earlier.domain, earlier.confidence) == \
        (alone.score, alone.signals, alone.domain, alone.confidence)


def test_what_follows_the_last_user_message_adds_nothing():
    alone = classify(user("Summarize this"))
    after = classify({"messages": [
        {"role": "user", "content": "Summarize this"},
        {"role": "assistant", "content": f"Sure: {FENCE} {MATH}"},
        {"role": "tool", "content": "architecture distributed consensus byzantine poem"},
        {"role": "system", "content": "Be brief."},
    ]})
    assert (after.score, after.signals, after.domain) == (alone.score, alone.signals, alone.domain)


def test_system_and_developer_messages_are_scored():
    found = classify({"messages": [
        {"role": "developer", "content": f"Reply with {MATH}"},
        {"role": "user", "content": "go"},
    ]})
    assert "math_notation" in found.signals and "system_prompt" in found.signals


def test_an_image_in_an_earlier_turn_still_needs_vision():
    for kind in ("image_url", "input_image", "image"):
        found = classify({"messages": [
            {"role": "user", "content": [{"type": kind}, {"type": "text", "text": "What is this?"}]},
            {"role": "assistant", "content": "A cat."},
            {"role": "user", "content": "And its colour?"},
        ]})
        assert found.required_capabilities == {"vision"}, kind


def test_tools_or_functions_need_tools():
    assert classify(user("hi", tools=[{"type": "function"}])).required_capabilities == {"tools"}
    assert classify(user("hi", functions=[{"name": "f"}])).required_capabilities == {"tools"}
    assert classify(user("hi", tools=[])).required_capabilities == frozenset()


def test_a_part_whose_type_is_not_a_string_is_no_image():
    content = [{"type": ["image_url"]}, {"type": {"type": "string"}}, {"type": "text", "text": "hi"}]
    assert classify({"messages": [{"role": "user", "content": content}]}).required_capabilities == frozenset()


@pytest.mark.parametrize("payload", [
    {}, {"messages": None}, {"messages": "hello"}, {"messages": [None, 3, "x", {"role": 5, "content": 7}]},
    {"messages": [{"role": "user"}]}, {"messages": [{"role": "user", "content": None}]},
    {"messages": [{"role": "user", "content": [None, 3, {"type": "image_url"}, {"type": "text", "text": 5}]}]},
    {"messages": [{"role": "user", "content": {"type": "text", "text": "hello"}}]},
    {"messages": [{"role": "user", "content": "```unclosed fence\n$x$ ` \\( \\["}]},
])
def test_odd_input_never_raises(payload):
    found = classify(payload)
    assert found.source == "rule" and found.complexity in ("trivial", "simple", "moderate", "complex", "expert")


# --- complexity ceilings -----------------------------------------------------------------------

def test_best_request_below_200_tokens_without_math_is_0_683():
    found = classify(user(padded(f"{FOUR_COMPLEX} {FENCE}", 199)))
    assert found.signals == ("complexity_keywords", "code_blocks")
    assert found.score == pytest.approx((0.4 * 0.15 + 0.8 * 0.25 + 0.75 * 0.2) / 0.6, abs=1e-6)
    assert found.score == pytest.approx(0.683, abs=5e-4) and found.complexity == "complex"


snippets = st.fixed_dictionaries({
    "complex": st.integers(0, 6),
    "fence": st.booleans(), "inline": st.booleans(), "code": st.booleans(), "creative": st.booleans(),
    "analysis": st.integers(0, 3), "translation": st.booleans(), "simple": st.booleans(),
    "system": st.booleans(), "tools": st.booleans(), "korean": st.booleans(), "pad": st.integers(0, 190),
})
COMPLEX_WORDS = ("architecture", "distributed", "consensus", "byzantine", "throughput", "asymptotic")
ANALYSIS_WORDS = ("analyze", "compare", "evaluate")


def drawn_request(d: dict, math: bool) -> dict:
    parts = list(COMPLEX_WORDS[:d["complex"]]) + list(ANALYSIS_WORDS[:d["analysis"]])
    parts += [FENCE] * d["fence"] + ["`f`"] * d["inline"] + ["implement a function"] * d["code"]
    parts += ["a poem"] * d["creative"] + ["translate it"] * d["translation"] + ["hello"] * d["simple"]
    parts += ["분산 시스템"] * d["korean"] + [MATH] * math + ["zebra"] * d["pad"]
    messages = [{"role": "system", "content": "Be terse."}] * d["system"]
    return {"messages": [*messages, {"role": "user", "content": " ".join(parts)}],
            "tools": [{"type": "function"}] if d["tools"] else []}


def scored_tokens(payload: dict) -> int:
    return estimated_tokens("\n".join(m["content"] for m in payload["messages"]))


@given(snippets)
def test_short_request_without_math_never_exceeds_0_683(d):
    payload = drawn_request(d, math=False)
    assume(scored_tokens(payload) < 200)
    assert classify(payload).score <= 0.68334


@given(snippets)
def test_request_below_50_tokens_never_exceeds_0_734(d):
    payload = drawn_request(d, math=True)
    assume(scored_tokens(payload) < 50)
    assert classify(payload).score <= 0.734375 + 1e-9


def test_best_request_below_50_tokens_with_everything_maxed_is_0_734():
    found = classify(user(f"{FOUR_COMPLEX} {MATH} {FENCE}"))
    assert found.signals == ("complexity_keywords", "code_blocks", "math_notation")
    assert found.score == pytest.approx(0.734, abs=5e-4) and found.complexity == "complex"


def test_math_and_four_complex_keywords_between_50_and_199_tokens_is_expert_0_767():
    found = classify(user(padded(f"{FOUR_COMPLEX} {MATH}", 100)))
    assert found.signals == ("complexity_keywords", "math_notation")
    assert found.score == pytest.approx(0.767, abs=5e-4) and found.complexity == "expert"


def test_a_fenced_block_keeps_it_expert_at_0_7625():
    found = classify(user(padded(f"{FOUR_COMPLEX} {MATH} {FENCE}", 100)))
    assert found.score == pytest.approx(0.7625) and found.complexity == "expert"


def test_three_complex_keywords_with_math_stay_below_expert_at_0_747():
    with_fence = classify(user(padded(f"{THREE_COMPLEX} {MATH} {FENCE}", 100)))
    without = classify(user(padded(f"{THREE_COMPLEX} {MATH}", 100)))
    assert with_fence.score == pytest.approx(0.746875) and with_fence.complexity == "complex"
    assert without.score == pytest.approx(0.7458, abs=5e-5) and without.complexity == "complex"


def test_inline_code_or_code_intent_pulls_the_math_case_below_expert():
    inline = classify(user(padded(f"{FOUR_COMPLEX} {MATH} in `solve()`", 100)))
    intent = classify(user(padded(f"{FOUR_COMPLEX} {MATH}. Implement it as a function", 100)))
    assert "inline_code" in inline.signals and "code_intent" in intent.signals
    for found in (inline, intent):
        assert found.score == pytest.approx((0.46 + 0.05) / 0.7) and found.complexity == "complex"


def test_without_math_expert_only_above_500_tokens():
    at_500 = classify(user(padded(f"{FOUR_COMPLEX} {FENCE}", 500)))
    at_501 = classify(user(padded(f"{FOUR_COMPLEX} {FENCE}", 501)))
    assert at_500.score == pytest.approx((0.6 * 0.15 + 0.8 * 0.25 + 0.75 * 0.2) / 0.6)
    assert at_500.complexity == "complex"
    assert at_501.score == pytest.approx((0.9 * 0.15 + 0.8 * 0.25 + 0.75 * 0.2) / 0.6) and at_501.complexity == "expert"


def test_system_prompt_and_tools_lower_an_otherwise_maxed_score():
    text = padded(f"{FOUR_COMPLEX} {MATH}", 90)
    bare = classify(user(text))
    system = classify({"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": text}]})
    tools = classify(user(text, tools=[{"type": "function"}]))
    assert bare.complexity == "expert"
    assert system.score == pytest.approx((0.46 + 0.05) / 0.7) and system.complexity == "complex"
    assert tools.score == pytest.approx((0.46 + 0.06) / 0.7) and tools.complexity == "complex"


def test_simple_markers_alone_score_zero_for_keywords():
    found = classify(user("hello, thank you"))
    assert found.signals == ("complexity_keywords",)
    assert found.score == pytest.approx(0.25 * 0.15 / 0.4) and found.complexity == "trivial"


def test_complex_keywords_outweigh_simple_markers():
    found = classify(user("What is the asymptotic complexity here?"))
    assert found.score == pytest.approx((0.25 * 0.15 + 0.6 * 0.25) / 0.4)


# --- formal-proof floor ----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    r"Prove that $\sqrt{2}$ is irrational.",
    r"Give a proof that \(\sum_{k=1}^n k = n(n+1)/2\).",
    r"Show that $\forall n, n^2 \geq n$.",
    r"$\sqrt{2}$가 무리수임을 증명하라.",
    r"$\sum_{k=1}^n k = n(n+1)/2$ 임을 증명해줘",
    r"다음을 증명하시오: $\forall x \in \mathbb{R}, x^2 \geq 0$",
])
def test_a_request_for_a_proof_of_a_formula_is_expert(text):
    found = classify(user(text))
    assert found.score < 0.75 and found.complexity == "expert"


@pytest.mark.parametrize("text", [
    r"What is a proof of $\sqrt{2}$ being irrational?",
    r"Explain the proof that $\sqrt{2}$ is irrational.",
    r"Why does this proof of $a^2 \geq 0$ work?",
    r"$\sqrt{2}$ 무리수 증명이란 무엇인가?",
    r"$\sqrt{2}$ 증명이 뭐야?",
])
def test_a_question_about_a_proof_is_not_floored(text):
    assert classify(user(text)).complexity != "expert"


def test_a_proof_request_without_math_notation_is_not_floored():
    assert classify(user("Prove that the square root of two is irrational.")).complexity != "expert"


def test_only_the_last_user_message_can_ask_for_a_proof():
    found = classify({"messages": [
        {"role": "system", "content": r"Prove that $\sqrt{2}$ is irrational when asked."},
        {"role": "user", "content": "ok"},
    ]})
    assert found.complexity != "expert"


# --- domain --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, domain", [
    ("Write a poem about autumn leaves", "creative"),
    ("What is a REST API?", "general"),
    ("이 REST API의 rate limiting 로직을 구현해줘.", "code"),
    ("Translate this Python function to Rust.", "multilingual"),
    ("this translates to a 2x speedup", "multilingual"),
    ("기계 번역 품질을 분석해줘", "multilingual"),
    ("Translate this poem into Korean: the leaves fall slowly", "multilingual"),
    (f"Translate this to Rust:\n{FENCE}", "code"),
    ("Translate this Python function's code to Rust.", "code"),
    (r"Translate this into Korean: $\frac{a}{b}$ is a ratio", "reasoning"),
])
def test_domain_follows_the_strongest_intent(text, domain):
    assert classify(user(text)).domain == domain


def test_code_intent_needs_two_distinct_code_markers():
    assert "code_intent" not in classify(user("What is a REST API?")).signals
    assert "code_intent" not in classify(user("Write a poem about autumn leaves")).signals
    assert "code_intent" in classify(user("이 REST API의 rate limiting 로직을 구현해줘.")).signals


def test_code_intent_is_skipped_when_the_request_has_code_markup():
    assert "code_intent" not in classify(user("Implement this function: `f(x)`")).signals
    assert "code_intent" not in classify(user(f"Implement this function:\n{FENCE}")).signals


def test_fenced_code_beats_math():
    assert classify(user(f"{MATH}\n{FENCE}")).domain == "code"


def test_math_beats_code_intent():
    assert classify(user(f"Implement a function for {MATH}")).domain == "reasoning"


def test_creative_and_analysis_strengths_grow_with_their_markers():
    assert classify(user("Translate this poem and song into Korean")).domain == "creative"       # 0.8 > 0.72
    assert classify(user("Translate, then analyze and compare the versions")).domain == "multilingual"  # 0.65
    assert classify(user("Translate, then analyze, compare and evaluate it")).domain == "analysis"  # 0.8


def test_ties_go_to_the_earlier_intent():
    assert classify(user(f"Write a poem and a haiku about {MATH}")).domain == "reasoning"   # math 0.8 = creative 0.8


def test_inline_code_alone_is_code():
    assert classify(user("Why is `x` undefined here?")).domain == "code"


def test_script_signal_is_the_domain_only_without_an_intent():
    assert classify(user("안녕하세요, 오늘 날씨가 좋네요")).domain == "multilingual"
    assert classify(user("Привет, как дела?")).domain == "multilingual"
    assert classify(user("시를 하나 써줘")).domain == "creative"


def test_script_signal_needs_30_percent_non_latin_letters():
    three_of_ten = "가나다 abcdefg"                # 3 non-Latin of 10 letters
    two_of_ten = "가나 abcdefgh"
    assert "multilingual" in classify(user(three_of_ten)).signals
    assert "multilingual" not in classify(user(two_of_ten)).signals


def test_primary_language_suppresses_the_script_signal_in_that_language_only():
    korean = RuleSettings(primary_language="ko")
    assert classify(user("안녕하세요, 오늘 날씨가 좋네요"), korean).domain == "general"
    assert classify(user("Привет, как дела?"), korean).domain == "multilingual"
    assert classify(user("hello there"), korean).domain == "general"


@pytest.mark.parametrize("text", [
    "Translate this sentence into Korean: good morning", "이 문장을 영어로 번역해줘", "この文を英語に翻訳してください",
    "请把这句话翻译成英文",
])
def test_translation_requests_are_multilingual_whatever_the_primary_language(text):
    for primary in (None, "ko", "ja", "zh", "en", "fr"):
        assert classify(user(text), RuleSettings(primary_language=primary)).domain == "multilingual", primary


def test_korean_keywords_apply_to_korean_requests():
    assert classify(user("이 보고서를 요약해줘")).domain == "analysis"
    assert classify(user("분산 시스템의 합의 알고리즘을 설명해줘")).signals[0] == "complexity_keywords"


def test_latin_text_uses_the_primary_language_table():
    fr = RuleSettings(primary_language="fr", keywords=MappingProxyType(
        {"fr": MappingProxyType({"creative": ("poème",)})}))
    assert classify(user("Écris un poème sur la mer"), fr).domain == "creative"
    assert classify(user("Écris un poème sur la mer")).domain == "general"


# --- confidence ----------------------------------------------------------------------------

def test_a_request_without_signals_has_confidence_0_55():
    assert classify(user("Tell me about zebras")).confidence == 0.55


def test_a_short_translation_request_reaches_the_hybrid_threshold():
    found = classify(user("Translate this sentence to French: see you tomorrow"))
    assert found.signals == ("translation_intent",) and found.confidence == 0.7


def test_each_intent_adds_0_15_and_each_other_signal_0_05():
    found = classify({"messages": [{"role": "system", "content": "Be terse."},
                                   {"role": "user", "content": "Analyze this poem"}]})
    assert found.signals == ("creative_markers", "analysis_markers", "system_prompt")
    assert found.confidence == 0.9          # 0.55 + 2 * 0.15 + 0.05, rounded to four places


def test_confidence_is_capped_at_0_95():
    found = classify(user(f"{FOUR_COMPLEX} {MATH} {FENCE} analyze and translate", tools=[{"type": "function"}]))
    assert found.confidence == 0.95


def test_creative_with_code_lowers_confidence_by_0_2():
    found = classify(user("Write a poem about `map`"))
    assert found.signals == ("inline_code", "creative_markers")
    assert found.confidence == pytest.approx(0.55 + 0.3 - 0.2)


@pytest.mark.parametrize("text", ["\\[ a" * 5000, "$$" + "a" * 64000, "\\( x" * 20000, "```a" * 20000,
                                  "$a " * 20000, "write a " * 20000])
def test_unclosed_delimiters_and_long_texts_classify_in_linear_time(text):
    # A client chooses the text and the event loop waits for the answer: no pattern may backtrack
    # on it. A guard, not a benchmark: the cubic pattern this replaced took 11 s on 4 KB of "\[ a".
    started = time.perf_counter()
    RuleClassifier().classify({"messages": [{"role": "user", "content": text}]})
    assert time.perf_counter() - started < 2


def test_math_delimiters_need_text_between_an_opener_and_the_next_closer():
    assert has_math("solve \\[ x^2 \\]") and has_math("$$ x $$") and has_math("\\( \\) then \\( y \\)")
    assert not has_math("$$ $$") and not has_math("costs $5 and $10") and not has_math("\\[ never closed")


# --- the same ceilings, in Korean ------------------------------------------------------------------

KO_FOUR_COMPLEX = "아키텍처 분산 최적화 동시성"      # four distinct Korean complex keywords
KO_THREE_COMPLEX = "아키텍처 분산 최적화"


def padded_ko(text: str, tokens: int) -> str:
    return padded(text, tokens, " 바다")


@pytest.mark.parametrize(("text", "tokens", "score", "level"), [
    (f"{KO_FOUR_COMPLEX} {FENCE}", 199, (0.4 * 0.15 + 0.8 * 0.25 + 0.75 * 0.2) / 0.6, "complex"),   # 0.683
    (f"{KO_FOUR_COMPLEX} {MATH}", 100, (0.4 * 0.15 + 0.8 * 0.25 + 1.0 * 0.2) / 0.6, "expert"),      # 0.767
    (f"{KO_FOUR_COMPLEX} {MATH} {FENCE}", 100, 0.7625, "expert"),
    (f"{KO_THREE_COMPLEX} {MATH} {FENCE}", 100, 0.746875, "complex"),                                 # 0.747
])
def test_korean_requests_reach_the_same_ceilings(text, tokens, score, level):
    found = classify(user(padded_ko(text, tokens)))
    assert found.language == "ko"
    assert found.score == pytest.approx(score, abs=1e-6) and found.complexity == level


def test_a_short_korean_request_with_everything_maxed_is_0_734():
    found = classify(user(f"{KO_FOUR_COMPLEX} {MATH} {FENCE}"))
    assert found.language == "ko" and found.score == pytest.approx(0.734375) and found.complexity == "complex"


def test_a_korean_request_for_a_proof_is_expert_and_a_question_about_one_is_not():
    assert classify(user(f"{MATH} 임을 증명하시오.")).complexity == "expert"
    assert classify(user(f"{MATH} 의 증명이란 무엇인가요?")).complexity != "expert"
