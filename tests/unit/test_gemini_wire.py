"""The gemini wire's translations, both ways, as plain functions (no I/O): chat -> GenerateContentRequest,
GenerateContentResponse (whole and streamed) -> chat, Google errors -> our envelope, embeddings both ways."""

from __future__ import annotations

import base64
import json
import struct

import httpx
import pytest

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.actors.routing.failover import Kind, classify_status
from switchyard.protocol.wires.gemini_answer import BufferedTranslator, StreamTranslator, chat_completion, refusal
from switchyard.protocol.wires.gemini_contents import signed_id, split_id, translate
from switchyard.protocol.wires.gemini_embeddings import EmbeddingsTranslator, embed_request
from switchyard.protocol.wires.gemini_errors import ErrorTranslator, envelope, retry_seconds
from switchyard.protocol.wires.gemini_request import generate_request, openapi_subset


def chat(**extra):
    return {"model": "g", "messages": [{"role": "user", "content": "hi"}], **extra}


def sse(*objs) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\r\n\r\n" for o in objs)


def events(out: list[bytes]) -> list:
    text = b"".join(out).decode()
    return [e[len("data: "):] if e == "data: [DONE]" else json.loads(e[len("data: "):])
            for e in text.split("\n\n") if e.startswith("data: ")]


# --- chat -> Gemini ----------------------------------------------------------------------------

def test_system_and_developer_messages_become_the_system_instruction():
    system, contents = translate([{"role": "system", "content": "A"}, {"role": "developer", "content": "B"},
                                  {"role": "user", "content": "hi"}])
    assert system == {"parts": [{"text": "A"}, {"text": "B"}]}
    assert contents == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_assistant_turns_are_model_turns_and_same_role_turns_merge():
    _, contents = translate([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                             {"role": "assistant", "content": "c"}])
    assert contents == [{"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
                        {"role": "model", "parts": [{"text": "c"}]}]


def test_a_tool_result_is_a_function_response_named_after_its_call():
    _, contents = translate([
        {"role": "user", "content": "w?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "f", "arguments": '{"x": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "plain text"}])
    assert contents[1] == {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"x": 1}}}]}
    assert contents[2] == {"role": "user", "parts": [{"functionResponse": {"name": "f",
                                                                           "response": {"output": "plain text"}}}]}


def test_a_tool_result_for_no_earlier_call_is_a_400_naming_it():
    with pytest.raises(InvalidRequest) as caught:
        translate([{"role": "tool", "tool_call_id": "nope", "content": "x"}])
    assert caught.value.param == "messages[0].tool_call_id"


def test_a_thought_signature_travels_inside_the_tool_call_id_and_back():
    sig = base64.b64encode(b"\xff\xfe sig").decode()
    tool_id = signed_id("call_1", sig)
    assert "+" not in tool_id and "/" not in tool_id and split_id(tool_id) == ("call_1", sig)
    assert split_id("call_plain") == ("call_plain", None)


def test_images_go_inline_from_data_urls_and_by_reference_otherwise():
    _, contents = translate([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}])
    assert contents[0]["parts"] == [{"inlineData": {"mimeType": "image/jpeg", "data": "QUJD"}},
                                    {"fileData": {"fileUri": "https://example.com/cat.png"}}]


def test_sampling_and_length_fields_go_to_the_generation_config():
    out = generate_request(chat(max_completion_tokens=9, temperature=0.5, top_p=0.9, top_k=40, seed=3,
                                stop=["END"], presence_penalty=0.1, frequency_penalty=0.2))
    assert out["generationConfig"] == {"maxOutputTokens": 9, "temperature": 0.5, "topP": 0.9, "topK": 40, "seed": 3,
                                       "presencePenalty": 0.1, "frequencyPenalty": 0.2, "stopSequences": ["END"]}


def test_json_object_asks_for_json_and_a_schema_beyond_the_openapi_subset_goes_as_json_schema():
    assert generate_request(chat(response_format={"type": "json_object"}))["generationConfig"] == \
        {"responseMimeType": "application/json"}
    strict = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    schema = {"type": "json_schema", "json_schema": {"name": "s", "schema": strict}}
    config = generate_request(chat(response_format=schema))["generationConfig"]
    assert config == {"responseMimeType": "application/json", "responseJsonSchema": strict}
    assert openapi_subset({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}})


def test_tool_choice_maps_to_function_calling_modes():
    tool = {"type": "function", "function": {"name": "f"}}
    assert generate_request(chat(tools=[tool], tool_choice="auto"))["toolConfig"] == \
        {"functionCallingConfig": {"mode": "AUTO"}}
    named = generate_request(chat(tools=[tool], tool_choice={"type": "function", "function": {"name": "f"}}))
    assert named["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}
    assert named["tools"] == [{"functionDeclarations": [{"name": "f"}]}]


def test_reasoning_effort_is_a_thinking_budget_with_thoughts_included():
    assert generate_request(chat(reasoning_effort="high"))["generationConfig"]["thinkingConfig"] == \
        {"thinkingBudget": 24576, "includeThoughts": True}
    assert generate_request(chat(reasoning_effort="none"))["generationConfig"]["thinkingConfig"] == \
        {"thinkingBudget": 0}


@pytest.mark.parametrize("effort", [["high"], {"effort": "high"}, 3])
def test_a_reasoning_effort_that_is_not_a_string_is_a_400_naming_it(effort):
    with pytest.raises(InvalidRequest) as caught:
        generate_request(chat(reasoning_effort=effort))
    assert caught.value.param == "reasoning_effort"


@pytest.mark.parametrize("fmt", [["wav"], {"format": "wav"}])
def test_an_audio_format_that_is_not_a_string_is_a_400_naming_the_part(fmt):
    part = {"type": "input_audio", "input_audio": {"format": fmt, "data": "AAAA"}}
    with pytest.raises(InvalidRequest) as caught:
        generate_request(chat(messages=[{"role": "user", "content": [part]}]))
    assert caught.value.param == "messages[0].content[0].input_audio"


def test_tool_call_arguments_nested_past_the_json_parser_are_a_400_naming_them():
    deep = "[" * 5000 + "]" * 5000
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": deep}}
    with pytest.raises(InvalidRequest) as caught:
        generate_request(chat(messages=[{"role": "user", "content": "q"},
                                        {"role": "assistant", "content": None, "tool_calls": [call]}]))
    assert caught.value.param == "messages[1].tool_calls[0].function.arguments"


def test_a_tool_result_nested_past_the_json_parser_goes_as_its_text():
    deep = "[" * 5000 + "]" * 5000
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    out = generate_request(chat(messages=[{"role": "user", "content": "q"},
                                          {"role": "assistant", "content": None, "tool_calls": [call]},
                                          {"role": "tool", "tool_call_id": "c1", "content": deep}]))
    assert out["contents"][-1]["parts"] == [{"functionResponse": {"name": "f", "response": {"output": deep}}}]


@pytest.mark.parametrize("field, value", [("n", 2), ("logit_bias", {"1": 2}), ("logprobs", True),
                                          ("audio", {"voice": "x"}), ("parallel_tool_calls", False)])
def test_a_field_gemini_cannot_carry_is_refused_by_name(field, value):
    with pytest.raises(UnsupportedRequestParameter) as caught:
        generate_request(chat(**{field: value}))
    assert caught.value.param == field


def test_gemini_native_fields_pass_and_a_generation_config_disagreement_is_refused():
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    out = generate_request(chat(safetySettings=safety, generationConfig={"candidateCount": 1}, max_tokens=5))
    assert out["safetySettings"] == safety and out["generationConfig"] == {"candidateCount": 1, "maxOutputTokens": 5}
    with pytest.raises(InvalidRequest):
        generate_request(chat(generationConfig={"maxOutputTokens": 3}, max_tokens=5))


def test_fields_with_no_gemini_counterpart_that_change_no_answer_are_not_sent():
    out = generate_request(chat(user="u1", metadata={"a": "b"}, store=False, stream=True,
                                stream_options={"include_usage": True}))
    assert set(out) == {"contents"}


# --- Gemini -> chat ----------------------------------------------------------------------------

ANSWER = {"candidates": [{"content": {"role": "model", "parts": [
    {"text": "hmm", "thought": True}, {"text": "Hi"},
    {"functionCall": {"name": "f", "args": {"x": 1}}, "thoughtSignature": "c2ln"}]},
    "finishReason": "STOP", "index": 0}],
    "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 3, "thoughtsTokenCount": 2,
                      "cachedContentTokenCount": 4, "totalTokenCount": 10}, "responseId": "r1"}


def test_a_whole_answer_is_a_chat_completion_with_reasoning_tool_calls_and_usage():
    out = chat_completion(ANSWER, "g", 1)
    message = out["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("Hi", "hmm")
    [call] = message["tool_calls"]
    assert call["function"] == {"name": "f", "arguments": '{"x": 1}'} and split_id(call["id"])[1] == "c2ln"
    assert out["choices"][0]["finish_reason"] == "tool_calls" and out["id"] == "chatcmpl-r1"
    assert out["usage"] == {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10,
                            "prompt_tokens_details": {"cached_tokens": 4},
                            "completion_tokens_details": {"reasoning_tokens": 2}}


@pytest.mark.parametrize("reason, finish", [("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "content_filter"),
                                            ("RECITATION", "content_filter"), ("OTHER", "stop")])
def test_finish_reasons_map_to_chats(reason, finish):
    answer = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}
    assert chat_completion(answer, "g", 1)["choices"][0]["finish_reason"] == finish


def test_a_blocked_prompt_and_an_empty_safety_stop_are_content_policy_refusals():
    blocked = refusal({"promptFeedback": {"blockReason": "SAFETY"}})
    assert blocked["error"]["code"] == "content_policy_violation"
    assert classify_status(400, json.dumps(blocked).encode()) is Kind.CONTENT_POLICY
    assert refusal({"candidates": [{"finishReason": "SAFETY"}]}) is not None
    assert refusal({"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "SAFETY"}]}) is None
    out = BufferedTranslator("g", 1)
    out.feed(json.dumps({"promptFeedback": {"blockReason": "OTHER"}}).encode())
    assert json.loads(out.close()[0])["error"]["details"] == {"block_reason": "OTHER"}


def test_a_stream_becomes_chat_chunks_with_done_only_after_a_finish_reason():
    t = StreamTranslator("g", include_usage=True, created=1)
    out = t.feed(sse({"candidates": [{"content": {"parts": [{"text": "a"}]}}], "responseId": "r"}))
    out += t.feed(sse({"candidates": [{"content": {"parts": [{"text": "b"}]}, "finishReason": "MAX_TOKENS"}],
                       "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 2, "totalTokenCount": 3}}))
    out += t.close()
    got = events(out)
    assert got[0]["choices"][0]["delta"] == {"role": "assistant", "content": "a"}
    assert got[2]["choices"][0]["finish_reason"] == "length"
    assert got[3]["usage"]["total_tokens"] == 3 and got[-1] == "[DONE]"
    cut = StreamTranslator("g", include_usage=False, created=1)
    assert "[DONE]" not in json.dumps(events(cut.feed(sse({"candidates": [{"content": {"parts": [{"text": "a"}]}}]})) +
                                             cut.close()))


def test_a_streamed_error_object_is_an_in_band_error_event():
    t = StreamTranslator("g", include_usage=False, created=1)
    [event] = events(t.feed(sse({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}})))
    assert event["error"]["code"] == "unavailable" and t.close() == []


# --- errors ------------------------------------------------------------------------------------

def test_a_429_carries_its_retry_delay_and_a_context_overflow_reads_as_one():
    body, delay = envelope({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12.5s"}]}})
    assert delay == 12.5 and body["error"]["code"] == "rate_limit_exceeded"
    overflow, _ = envelope({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                      "message": "The input token count (2000000) exceeds the maximum number of "
                                                 "tokens allowed (1048576)."}})
    assert classify_status(400, json.dumps(overflow).encode()) is Kind.CONTEXT_WINDOW
    assert retry_seconds("37s") == 37.0 and retry_seconds("soon") is None


def test_an_error_body_sets_retry_after_once_read_and_other_shapes_pass_as_they_came():
    t = ErrorTranslator()
    t.headers = httpx.Headers()
    t.feed(json.dumps({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "q", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.2s"}]}}).encode())
    assert json.loads(t.close()[0])["error"]["type"] == "rate_limit_error" and t.headers["retry-after"] == "1"
    other = ErrorTranslator()
    other.feed(b"<html>bad gateway</html>")
    assert other.close() == [b"<html>bad gateway</html>"]


# --- embeddings --------------------------------------------------------------------------------

def test_embeddings_requests_for_one_text_and_a_list():
    assert embed_request({"model": "e", "input": "a", "dimensions": 8}, "e") == \
        {"content": {"parts": [{"text": "a"}]}, "outputDimensionality": 8}
    assert embed_request({"model": "e", "input": ["a", "b"]}, "e")["requests"][1] == \
        {"model": "models/e", "content": {"parts": [{"text": "b"}]}}
    with pytest.raises(UnsupportedRequestParameter):
        embed_request({"model": "e", "input": [[1, 2, 3]]}, "e")


def test_embeddings_answers_become_openai_lists_in_floats_or_base64():
    t = EmbeddingsTranslator("e", base64_out=True)
    t.feed(json.dumps({"embeddings": [{"values": [0.5, -1.0]}]}).encode())
    out = json.loads(t.close()[0])
    assert out["object"] == "list" and out["model"] == "e"
    assert struct.unpack("<2f", base64.b64decode(out["data"][0]["embedding"])) == (0.5, -1.0)


# --- config and addressing ---------------------------------------------------------------------

def _backend(extra: str):
    from switchyard.config.load import load_text
    return load_text("backends:\n  - name: g\n    type: gemini\n    models: [gemini-2.5-flash]\n" + extra,
                     env={}).snapshot.backends[0]


def test_a_gemini_backend_defaults_to_googles_url_and_its_version_is_the_wires():
    from switchyard.actors.addressing import auth_headers
    from switchyard.config.schema import BackendType
    from switchyard.protocol.wires.gemini import wire_id
    plain = _backend("    api_key: k\n")
    assert plain.type is BackendType.GEMINI and plain.url == "https://generativelanguage.googleapis.com"
    assert _backend("    url: https://proxy.example/v1beta/\n").url == "https://proxy.example"
    assert auth_headers(plain) == [("x-goog-api-key", "k")]
    assert wire_id(plain, "models/gemini-2.5-flash") == "gemini-2.5-flash"
