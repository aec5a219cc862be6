"""The LLM classifier's prompt, request body per strategy, answer parsing and cache key (pure)."""

from __future__ import annotations

import hashlib
import json

import attrs
import pytest

from switchyard.actors.routing.classifier_prompt import (
    BUILTIN_EXAMPLES,
    MalformedAnswer,
    cache_key,
    classifier_request,
    correction_messages,
    parse_answer,
    strategy_for,
    user_content,
)
from switchyard.config.schema import BackendType
from switchyard.config.smart_routing import (
    COMPLEXITY_LEVELS,
    ClassifierSettings,
    CustomDomain,
    CustomLevel,
    FewShotExample,
    LlmSettings,
)

S = ClassifierSettings(method="llm", llm=LlmSettings(model="tiny"))
CUSTOM = attrs.evolve(S, custom_complexity_levels=(CustomLevel("specialized", "needs a fine-tuned model", 6),
                                                   CustomLevel("routine")),
                      custom_domains=(CustomDomain("medical", "clinical questions"),))


def chat(*messages: tuple[str, object]) -> dict:
    return {"model": "auto", "messages": [{"role": role, "content": content} for role, content in messages]}


def answer(content: object = None, **message) -> dict:
    return {"model": "tiny", "choices": [{"index": 0, "message": {"role": "assistant", "content": content,
                                                                  **message}}]}


def tool_answer(arguments: object, name: str = "classify") -> dict:
    return answer(None, tool_calls=[{"id": "c1", "type": "function",
                                     "function": {"name": name, "arguments": arguments}}])


def sent_request(payload: dict, settings: ClassifierSettings = S) -> str:
    """The request text between the tags of the classifier's user message."""
    content = user_content(payload, settings)
    return content[content.index("<request>\n") + 10:content.rindex("\n</request>")]


# --- strategy_for -----------------------------------------------------------------------


@pytest.mark.parametrize("backend_type", [BackendType.OPENAI, BackendType.VLLM, BackendType.SGLANG,
                                          BackendType.SIMULATED])
def test_auto_asks_openai_compatible_servers_for_a_json_schema(backend_type):
    assert strategy_for("auto", backend_type) == "json_schema"


def test_auto_asks_ollama_for_json_mode():
    assert strategy_for("auto", BackendType.OLLAMA) == "json_object"


def test_auto_gives_generic_backends_instructions_only():
    assert strategy_for("auto", BackendType.GENERIC) == "prompt_only"


@pytest.mark.parametrize("setting", ["json_schema", "tool_use", "json_object", "prompt_only"])
def test_an_explicit_strategy_is_used_as_configured(setting):
    assert strategy_for(setting, BackendType.OLLAMA) == setting


# --- the request body -----------------------------------------------------------------------


def test_body_is_a_non_streaming_chat_with_the_configured_model_and_sampling():
    s = attrs.evolve(S, llm=attrs.evolve(S.llm, temperature=0.2, max_output_tokens=90))
    body = classifier_request(chat(("user", "hi")), s, "prompt_only")
    assert (body["model"], body["temperature"], body["max_tokens"], body["stream"]) == ("tiny", 0.2, 90, False)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_json_schema_strategy_sends_a_strict_schema_whose_enums_are_the_taxonomy():
    body = classifier_request(chat(("user", "hi")), CUSTOM, "json_schema")
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True and fmt["json_schema"]["name"]
    schema = fmt["json_schema"]["schema"]
    assert schema["properties"]["complexity"]["enum"] == [*COMPLEXITY_LEVELS, "specialized", "routine"]
    assert schema["properties"]["domain"]["enum"] == list(CUSTOM.domains)
    assert schema["required"] == ["complexity", "domain", "confidence"]
    assert schema["additionalProperties"] is False


def test_json_object_strategy_sends_json_mode():
    body = classifier_request(chat(("user", "hi")), S, "json_object")
    assert body["response_format"] == {"type": "json_object"} and "tools" not in body


def test_tool_use_strategy_forces_one_classify_function_with_the_schema():
    body = classifier_request(chat(("user", "hi")), CUSTOM, "tool_use")
    [tool] = body["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "classify"
    assert tool["function"]["parameters"]["properties"]["domain"]["enum"][-1] == "medical"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "classify"}}
    assert "response_format" not in body
    assert "calling the classify function" in body["messages"][0]["content"]


def test_prompt_only_strategy_sends_instructions_alone():
    body = classifier_request(chat(("user", "hi")), S, "prompt_only")
    assert "response_format" not in body and "tools" not in body and "tool_choice" not in body
    assert "Answer with only this JSON object" in body["messages"][0]["content"]


def test_system_prompt_lists_every_level_with_its_rank_and_every_domain_with_its_description():
    system = classifier_request(chat(("user", "hi")), CUSTOM, "json_schema")["messages"][0]["content"]
    for rank, level in enumerate(COMPLEXITY_LEVELS, start=1):
        assert f"- {level} (rank {rank}):" in system
    assert "- specialized (rank 6): needs a fine-tuned model" in system
    assert "- routine (unranked):" in system
    for domain in CUSTOM.domains:
        assert f"- {domain}:" in system
    assert "- medical: clinical questions" in system
    assert '"complexity"' in system and '"domain"' in system and '"confidence"' in system


def test_builtin_examples_span_trivial_to_expert_and_code_creative_multilingual():
    assert {c for _, c, _, _ in BUILTIN_EXAMPLES} == set(COMPLEXITY_LEVELS)
    assert {"code", "creative", "multilingual"} <= {d for _, _, d, _ in BUILTIN_EXAMPLES}
    system = classifier_request(chat(("user", "hi")), S, "json_schema")["messages"][0]["content"]
    for text, _, _, _ in BUILTIN_EXAMPLES:
        assert f"Request: {text}" in system


def test_custom_examples_follow_the_builtin_ones():
    example = FewShotExample("What is the usual dose of ibuprofen?", "simple", "medical")
    s = attrs.evolve(CUSTOM, llm=attrs.evolve(S.llm, custom_examples=(example,)))
    system = classifier_request(chat(("user", "hi")), s, "json_schema")["messages"][0]["content"]
    assert system.index(BUILTIN_EXAMPLES[-1][0]) < system.index("Request: What is the usual dose of ibuprofen?")
    assert '"complexity": "simple", "domain": "medical"' in system


def test_few_shot_examples_false_leaves_only_the_custom_examples():
    example = FewShotExample("Summarize this lab report.", "moderate", "analysis")
    s = attrs.evolve(S, llm=attrs.evolve(S.llm, few_shot_examples=False, custom_examples=(example,)))
    system = classifier_request(chat(("user", "hi")), s, "json_schema")["messages"][0]["content"]
    assert all(text not in system for text, _, _, _ in BUILTIN_EXAMPLES)
    assert "Request: Summarize this lab report." in system
    bare = attrs.evolve(S, llm=attrs.evolve(S.llm, few_shot_examples=False))
    assert "Examples:" not in classifier_request(chat(("user", "hi")), bare, "json_schema")["messages"][0]["content"]


# --- what the classifier is shown -------------------------------------------------------------


def test_only_the_last_user_message_is_shown():
    payload = chat(("user", "first question"), ("assistant", "first answer"), ("user", "second question"),
                   ("assistant", "a prefill"))
    assert sent_request(payload) == "second question"
    assert "first" not in user_content(payload, S) and "prefill" not in user_content(payload, S)


def test_text_parts_are_joined_and_other_parts_carry_no_text():
    payload = chat(("user", [{"type": "text", "text": "look at this"},
                             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                             {"type": "text", "text": "what is it?"}]))
    assert sent_request(payload) == "look at this\nwhat is it?"


def test_last_user_message_is_cut_to_max_input_tokens_times_4_characters():
    s = attrs.evolve(S, llm=attrs.evolve(S.llm, max_input_tokens=25))
    assert sent_request(chat(("user", "y" * 1000)), s) == "y" * 100
    assert sent_request(chat(("user", "y" * 99)), s) == "y" * 99


def test_system_and_developer_prompts_give_200_characters_of_context():
    payload = chat(("system", "s" * 150), ("developer", "d" * 150), ("user", "hi"))
    content = user_content(payload, S)
    excerpt = content[content.index("<system>\n") + 9:content.index("\n</system>")]
    assert excerpt == ("s" * 150 + "\n" + "d" * 150)[:200]
    assert content.index("</system>") < content.index("<request>")


def test_without_a_system_prompt_no_context_is_shown():
    assert "<system>" not in user_content(chat(("user", "hi")), S)


def test_a_request_without_a_user_message_is_shown_as_empty():
    assert sent_request(chat(("system", "be brief"))) == ""


# --- cache key ---------------------------------------------------------------------------------


def test_cache_key_is_the_sha256_of_what_the_classifier_is_shown():
    payload = chat(("user", "hello there"))
    assert cache_key(payload, S) == hashlib.sha256(user_content(payload, S).encode()).hexdigest()


def test_identical_last_messages_share_a_cache_key_whatever_came_before():
    a = chat(("user", "one"), ("assistant", "two"), ("user", "same question"))
    b = chat(("user", "same question"))
    assert cache_key(a, S) == cache_key(b, S)
    assert cache_key(chat(("user", "other question")), S) != cache_key(b, S)


def test_text_past_the_truncation_does_not_change_the_cache_key():
    s = attrs.evolve(S, llm=attrs.evolve(S.llm, max_input_tokens=2))
    assert cache_key(chat(("user", "12345678-tail-a")), s) == cache_key(chat(("user", "12345678-tail-b")), s)


# --- parsing the answer ---------------------------------------------------------------------------


def test_json_schema_answer_becomes_an_llm_classification():
    result = parse_answer(answer('{"complexity": "complex", "domain": "analysis", "confidence": 0.66}'),
                          "json_schema", S)
    assert (result.complexity, result.domain, result.confidence, result.source) == ("complex", "analysis", 0.66,
                                                                                   "llm")


def test_raw_bytes_of_the_response_are_accepted():
    raw = json.dumps(answer('{"complexity": "simple", "domain": "general", "confidence": 0.9}')).encode()
    assert parse_answer(raw, "json_schema", S).complexity == "simple"


def test_capabilities_and_language_are_left_to_the_caller():
    result = parse_answer(answer('{"complexity": "simple", "domain": "general"}'), "json_object", S)
    assert result.required_capabilities == frozenset() and result.language is None and result.score is None


def test_tool_use_answer_is_read_from_the_classify_call():
    result = parse_answer(tool_answer('{"complexity": "expert", "domain": "reasoning", "confidence": 0.5}'),
                          "tool_use", S)
    assert (result.complexity, result.domain, result.confidence) == ("expert", "reasoning", 0.5)


def test_tool_use_arguments_given_as_an_object_are_accepted():
    result = parse_answer(tool_answer({"complexity": "trivial", "domain": "general"}), "tool_use", S)
    assert result.complexity == "trivial"


def test_tool_use_without_a_tool_call_is_malformed():
    with pytest.raises(MalformedAnswer) as err:
        parse_answer(answer('{"complexity": "simple", "domain": "general"}'), "tool_use", S)
    assert err.value.reason == "choices[0].message.tool_calls: no classify call"
    assert err.value.text == '{"complexity": "simple", "domain": "general"}'


@pytest.mark.parametrize("strategy", ["json_object", "prompt_only"])
@pytest.mark.parametrize("content", [
    '```json\n{"complexity": "moderate", "domain": "creative"}\n```',
    '```\n{"complexity": "moderate", "domain": "creative"}\n```',
    'Sure. {"complexity": "moderate", "domain": "creative", "confidence": 0.8} Anything else?',
    'I think {this} fits: {"complexity": "moderate", "domain": "creative"}',
])
def test_json_mode_and_prompt_only_tolerate_fences_and_surrounding_text(strategy, content):
    result = parse_answer(answer(content), strategy, S)
    assert (result.complexity, result.domain) == ("moderate", "creative")


def test_json_schema_answer_must_be_the_object_alone():
    with pytest.raises(MalformedAnswer) as err:
        parse_answer(answer('```json\n{"complexity": "moderate", "domain": "code"}\n```'), "json_schema", S)
    assert err.value.reason == "choices[0].message.content: not JSON"


def test_labels_match_case_insensitively_and_come_back_in_the_configured_spelling():
    result = parse_answer(answer('{"complexity": " Specialized ", "domain": "MEDICAL"}'), "json_object", CUSTOM)
    assert (result.complexity, result.domain) == ("specialized", "medical")


@pytest.mark.parametrize(("content", "reason"), [
    ('{"complexity": "hard", "domain": "code"}',
     "complexity: 'hard' is not one of trivial, simple, moderate, complex, expert"),
    ('{"complexity": "simple", "domain": "medical"}',
     "domain: 'medical' is not one of general, code, reasoning, creative, analysis, multilingual"),
])
def test_an_unknown_level_or_domain_is_malformed_naming_the_field(content, reason):
    with pytest.raises(MalformedAnswer) as err:
        parse_answer(answer(content), "json_schema", S)
    assert err.value.reason == reason and err.value.text == content


@pytest.mark.parametrize(("content", "reason"), [
    ('{"complexity": 3, "domain": "code"}', "complexity: must be a string, got a number"),
    ('{"complexity": "simple"}', "domain: must be a string, got null"),
    ('{"complexity": "simple", "domain": "code", "confidence": "high"}', "confidence: must be a number, got a string"),
    ('{"complexity": "simple", "domain": "code", "confidence": true}', "confidence: must be a number, got a boolean"),
    ('["simple", "code"]', "choices[0].message.content: not a JSON object"),
])
def test_wrong_types_are_malformed(content, reason):
    with pytest.raises(MalformedAnswer) as err:
        parse_answer(answer(content), "json_schema", S)
    assert err.value.reason == reason


@pytest.mark.parametrize(("given", "kept"), [(1.7, 1.0), (-0.2, 0.0), (0.42, 0.42), (1, 1.0)])
def test_confidence_is_clamped_to_0_1(given, kept):
    content = json.dumps({"complexity": "simple", "domain": "code", "confidence": given})
    assert parse_answer(answer(content), "json_schema", S).confidence == kept


@pytest.mark.parametrize("content", ['{"complexity": "simple", "domain": "code"}',
                                     '{"complexity": "simple", "domain": "code", "confidence": null}'])
def test_missing_confidence_defaults_to_0_8(content):
    assert parse_answer(answer(content), "json_schema", S).confidence == 0.8


@pytest.mark.parametrize(("response", "reason"), [
    (b"<html>bad gateway</html>", "response body: not JSON"),
    (b"[1, 2]", "response body: not a JSON object"),
    ({"choices": []}, "choices: missing or empty"),
    ({"object": "chat.completion"}, "choices: missing or empty"),
    ({"choices": [{"index": 0}]}, "choices[0].message: missing"),
    (answer(""), "choices[0].message.content: empty"),
    (answer("no json here at all"), "choices[0].message.content: no JSON object found"),
])
def test_an_answer_without_a_classification_is_malformed(response, reason):
    strategy = "prompt_only" if isinstance(response, dict) and response.get("choices") else "json_schema"
    with pytest.raises(MalformedAnswer) as err:
        parse_answer(response, strategy, S)
    assert err.value.reason == reason


# --- the correction ------------------------------------------------------------------------------


def test_correction_keeps_the_conversation_and_adds_the_bad_answer_and_what_was_wrong():
    body = classifier_request(chat(("user", "hi")), S, "json_schema")
    retry = correction_messages(body, '{"complexity": "hard"}', "complexity: 'hard' is not one of ...")
    assert retry["messages"][:2] == body["messages"]
    assert retry["messages"][2] == {"role": "assistant", "content": '{"complexity": "hard"}'}
    last = retry["messages"][3]
    assert last["role"] == "user" and "complexity: 'hard' is not one of ..." in last["content"]
    assert "only the JSON object" in last["content"]
    assert {k: v for k, v in retry.items() if k != "messages"} == {k: v for k, v in body.items() if k != "messages"}
    assert len(body["messages"]) == 2   # the original body is left as it was


def test_correction_for_a_forced_tool_asks_for_the_call_again():
    body = classifier_request(chat(("user", "hi")), S, "tool_use")
    retry = correction_messages(body, "", "choices[0].message.tool_calls: no classify call")
    assert [m["role"] for m in retry["messages"]] == ["system", "user", "user"]   # no empty assistant turn
    assert "Call the classify function again" in retry["messages"][-1]["content"]
    assert retry["tool_choice"] == body["tool_choice"]
