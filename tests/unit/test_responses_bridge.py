"""The Responses API bridge's translation tables, both ways (pure: no gateway, no clock)."""

from __future__ import annotations

import pytest

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.config.load import ConfigError, load_file
from switchyard.protocol.wires.responses import wants_bridge_for_tools
from switchyard.protocol.wires.responses_answers import StreamToChat, response_to_chat
from switchyard.protocol.wires.responses_bridge import chat_to_responses

USER = {"role": "user", "content": "hi"}


def translate(**fields):
    payload = {"model": "pro", "messages": [USER], **fields}
    return chat_to_responses(payload, "pro").body


def refused(kind, **fields):
    with pytest.raises(kind) as caught:
        translate(**fields)
    return caught.value


# --- chat request -> Responses request ------------------------------------------------------

def test_leading_system_and_developer_messages_become_instructions_the_rest_input_items():
    body = chat_to_responses({"model": "pro", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "text", "text": "Use French."}]},
        USER,
        {"role": "system", "content": "Later rule."},
    ]}, "pro").body
    assert body["instructions"] == "Be brief.\n\nUse French."
    assert body["input"] == [{"type": "message", "role": "user", "content": "hi"},
                             {"type": "message", "role": "system", "content": "Later rule."}]
    assert body["model"] == "pro"


def test_user_content_parts_become_input_text_image_and_file_parts():
    body = translate(messages=[{"role": "user", "content": [
        {"type": "text", "text": "look", "prompt_cache_breakpoint": {"ttl": "30m"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
        {"type": "file", "file": {"file_id": "file-1"}},
    ]}])
    assert body["input"][0]["content"] == [
        {"type": "input_text", "text": "look", "prompt_cache_breakpoint": {"ttl": "30m"}},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
        {"type": "input_file", "file_id": "file-1"}]


def test_assistant_tool_calls_become_function_call_items_and_tool_messages_their_outputs():
    body = translate(messages=[USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny.", "reasoning_content": "the tool said so"}])
    assert body["input"][1:] == [
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "assistant", "content": "It is sunny."}]


def test_assistant_refusal_is_carried_as_a_refusal_part():
    body = translate(messages=[USER, {"role": "assistant", "content": None, "refusal": "I can't."}])
    assert body["input"][1] == {"type": "message", "role": "assistant",
                                "content": [{"type": "refusal", "refusal": "I can't."}]}


def test_function_tools_become_flat_function_tools_not_strict_unless_asked():
    body = translate(tools=[{"type": "function", "function": {
        "name": "get_weather", "description": "Weather now", "parameters": {"type": "object"}}}],
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False)
    assert body["tools"] == [{"type": "function", "name": "get_weather", "description": "Weather now",
                              "parameters": {"type": "object"}, "strict": False}]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["parallel_tool_calls"] is False


def test_allowed_tools_choice_is_translated():
    body = translate(tool_choice={"type": "allowed_tools", "allowed_tools": {
        "mode": "required", "tools": [{"type": "function", "function": {"name": "a"}}]}})
    assert body["tool_choice"] == {"type": "allowed_tools", "mode": "required",
                                   "tools": [{"type": "function", "name": "a"}]}


def test_max_tokens_or_max_completion_tokens_become_max_output_tokens():
    assert translate(max_tokens=300)["max_output_tokens"] == 300
    assert translate(max_completion_tokens=200)["max_output_tokens"] == 200
    assert refused(InvalidRequest, max_tokens=1, max_completion_tokens=2).param == "max_tokens"


def test_reasoning_effort_verbosity_and_response_format_map_into_reasoning_and_text():
    body = translate(reasoning_effort="high", verbosity="low", response_format={
        "type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True}})
    assert body["reasoning"] == {"effort": "high"}
    assert body["text"] == {"verbosity": "low", "format": {"type": "json_schema", "name": "answer",
                                                           "schema": {"type": "object"}, "strict": True}}
    assert translate(response_format={"type": "json_object"})["text"] == {"format": {"type": "json_object"}}


def test_gpt5_controls_and_identifiers_are_preserved():
    fields = {"metadata": {"team": "a"}, "safety_identifier": "u-1", "prompt_cache_key": "k",
              "prompt_cache_retention": "24h", "prompt_cache_options": {"mode": "implicit"}, "user": "bob",
              "store": False, "service_tier": "flex", "temperature": 0.2, "top_p": 0.9, "stream": True}
    body = translate(**fields)
    assert {k: body[k] for k in fields} == fields


def test_stream_options_include_usage_is_consumed_by_the_bridge():
    translated = chat_to_responses({"model": "pro", "messages": [USER], "stream": True,
                                    "stream_options": {"include_usage": True}}, "pro")
    assert translated.include_usage is True and "stream_options" not in translated.body


@pytest.mark.parametrize("field, value, param", [
    ("reasoning_effort", "extreme", "reasoning_effort"),
    ("verbosity", "loud", "verbosity"),
    ("prompt_cache_retention", "in-memory", "prompt_cache_retention"),
    ("metadata", {"n": 1}, "metadata.n"),
    ("response_format", {"type": "yaml"}, "response_format.type"),
    ("max_tokens", 0, "max_tokens"),
    ("temperature", "hot", "temperature"),
])
def test_invalid_values_are_refused_naming_the_field(field, value, param):
    assert refused(InvalidRequest, **{field: value}).param == param


@pytest.mark.parametrize("field, value", [
    ("stop", ["END"]), ("n", 2), ("seed", 7), ("logprobs", True), ("presence_penalty", 0.5),
    ("audio", {"voice": "alloy"}), ("top_k", 40), ("functions", [{"name": "f"}]),
])
def test_fields_the_responses_api_cannot_carry_are_refused_never_dropped(field, value):
    err = refused(UnsupportedRequestParameter, **{field: value})
    assert err.param == field and "Responses API" in err.message


def test_values_that_ask_for_nothing_pass_without_a_counterpart():
    body = translate(n=1, presence_penalty=0, frequency_penalty=0.0, logprobs=False, stop=None, seed=None)
    assert set(body) == {"model", "input", "store"}


def test_the_bridge_stores_nothing_unless_the_client_asks():
    assert translate()["store"] is False
    assert translate(store=True)["store"] is True


def test_non_function_tools_and_message_names_are_refused():
    assert refused(UnsupportedRequestParameter, tools=[{"type": "custom", "custom": {"name": "x"}}]).param \
        == "tools[0].type"
    err = refused(UnsupportedRequestParameter, messages=[{"role": "user", "content": "hi", "name": "bob"}])
    assert err.param == "messages[0].name"


def test_tools_with_a_reasoning_effort_other_than_none_want_the_bridge():
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert wants_bridge_for_tools({"tools": tools, "reasoning_effort": "low"})
    assert wants_bridge_for_tools({"tools": tools, "reasoning": {"effort": "high"}})
    assert not wants_bridge_for_tools({"tools": tools, "reasoning_effort": "none"})
    assert not wants_bridge_for_tools({"tools": tools})
    assert not wants_bridge_for_tools({"reasoning_effort": "high"})


# --- Responses answer -> chat answer -----------------------------------------------------------

def response(status="completed", output=(), **extra):
    return {"id": "resp_1", "object": "response", "created_at": 1700000000, "model": "pro", "status": status,
            "output": list(output), "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                                               "input_tokens_details": {"cached_tokens": 2},
                                               "output_tokens_details": {"reasoning_tokens": 3}}, **extra}


MESSAGE = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi.",
                                                                  "annotations": []}]}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan."},
                                                            {"type": "summary_text", "text": "Answer."}]}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}


def test_a_completed_response_becomes_a_chat_completion_with_usage():
    chat = response_to_chat(response(output=[MESSAGE]))
    assert chat == {"id": "resp_1", "object": "chat.completion", "created": 1700000000, "model": "pro",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi.", "refusal": None},
                                 "logprobs": None, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                              "prompt_tokens_details": {"cached_tokens": 2},
                              "completion_tokens_details": {"reasoning_tokens": 3}}}


def test_reasoning_items_become_reasoning_content():
    message = response_to_chat(response(output=[REASONING, MESSAGE]))["choices"][0]["message"]
    assert message["reasoning_content"] == "Plan.\n\nAnswer." and message["content"] == "Hi."


def test_a_refusal_finishes_with_content_filter():
    refusal = {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}
    choice = response_to_chat(response(output=[refusal]))["choices"][0]
    assert choice["message"]["refusal"] == "No." and choice["message"]["content"] is None
    assert choice["finish_reason"] == "content_filter"


@pytest.mark.parametrize("reason, finish", [("max_output_tokens", "length"), ("content_filter", "content_filter")])
def test_an_incomplete_response_finishes_with_length_or_content_filter(reason, finish):
    chat = response_to_chat(response("incomplete", [MESSAGE], incomplete_details={"reason": reason}))
    assert chat["choices"][0]["finish_reason"] == finish


def test_function_calls_become_tool_calls():
    choice = response_to_chat(response(output=[CALL]))["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]


def test_a_failed_or_cancelled_response_becomes_an_error_envelope():
    failed = response_to_chat(response("failed", error={"code": "server_error", "message": "boom"}))
    assert failed == {"error": {"message": "boom", "type": "server_error", "param": None, "code": "server_error"}}
    cancelled = response_to_chat(response("cancelled"))
    assert cancelled["error"]["code"] == "response_cancelled"


def feed(translator, *events):
    out = []
    for event in events:
        out += translator.feed(event)
    return out


def created():
    return {"type": "response.created", "response": {**response("in_progress"), "usage": None}}


def completed(status="completed", **extra):
    return {"type": f"response.{status}", "response": response(status, **extra)}


def test_stream_text_deltas_become_chunks_the_first_with_the_role():
    chunks = feed(StreamToChat(False), created(),
                  {"type": "response.output_text.delta", "delta": "Hel"},
                  {"type": "response.output_text.delta", "delta": "lo"}, completed())
    assert [c["choices"][0]["delta"] for c in chunks] == [{"role": "assistant", "content": "Hel"},
                                                          {"content": "lo"}, {}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert {c["id"] for c in chunks} == {"resp_1"} and chunks[0]["object"] == "chat.completion.chunk"


def test_stream_nothing_is_sent_before_the_first_content():
    assert feed(StreamToChat(False), created(), {"type": "response.in_progress", "response": {}}) == []


def test_stream_reasoning_summary_deltas_become_reasoning_content():
    chunks = feed(StreamToChat(False), created(),
                  {"type": "response.reasoning_summary_text.delta", "item_id": "rs", "summary_index": 0, "delta": "A"},
                  {"type": "response.reasoning_summary_text.delta", "item_id": "rs", "summary_index": 1, "delta": "B"},
                  {"type": "response.output_text.delta", "delta": "C"})
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "reasoning_content": "A"}, {"reasoning_content": "\n\nB"}, {"content": "C"}]


def test_stream_refusal_finishes_with_content_filter():
    chunks = feed(StreamToChat(False), created(), {"type": "response.refusal.delta", "delta": "No."}, completed())
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "refusal": "No."}
    assert chunks[-1]["choices"][0]["finish_reason"] == "content_filter"


def test_stream_incomplete_finishes_with_length():
    chunks = feed(StreamToChat(False), created(), {"type": "response.output_text.delta", "delta": "x"},
                  completed("incomplete", incomplete_details={"reason": "max_output_tokens"}))
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_stream_function_calls_become_tool_call_deltas():
    chunks = feed(StreamToChat(False), created(),
                  {"type": "response.output_item.added", "output_index": 0, "item": {**CALL, "arguments": ""}},
                  {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"},
                  {"type": "response.output_item.done", "output_index": 0, "item": CALL},
                  {"type": "response.output_item.done", "output_index": 1, "item": {**CALL, "call_id": "call_2"}},
                  completed(output=[CALL]))
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}
    assert deltas[1] == {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}
    # a call whose arguments came whole, in its done event only
    assert deltas[2]["tool_calls"][0]["id"] == "call_2" and deltas[3]["tool_calls"][0]["function"] == {
        "arguments": "{}"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_usage_chunk_only_when_asked():
    assert "usage" not in feed(StreamToChat(False), created(), completed())[-1]
    last = feed(StreamToChat(True), created(), completed())[-1]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 5


def test_stream_failure_becomes_an_error_object():
    translator = StreamToChat(False)
    out = feed(translator, created(), completed("failed", error={"code": "server_error", "message": "boom"}))
    assert out == [{"error": {"message": "boom", "type": "server_error", "param": None, "code": "server_error"}}]
    assert translator.done and translator.failed
    event = StreamToChat(False).feed({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"})
    assert event[0]["error"]["message"] == "slow down" and event[0]["error"]["code"] == "rate_limit_exceeded"


# --- the metadata flags ------------------------------------------------------------------------

def load_config(tmp_path, metadata: str):
    path = tmp_path / "config.yaml"
    path.write_text("backends:\n  - name: b\n    type: openai\n    url: http://b.example.invalid\n"
                    f"    models: [m]\n    model_configs:\n      - {{id: m, metadata: {metadata}}}\n")
    return load_file(path)


def test_the_narrower_flag_is_a_metadata_boolean_like_responses_only(tmp_path):
    loaded = load_config(tmp_path, "{chat_completions_tools_require_none_reasoning: true}")
    meta = loaded.snapshot.metadata_for("m", "b")
    assert meta.chat_completions_tools_require_none_reasoning is True and meta.responses_only is None
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, "{chat_completions_tools_require_none_reasoning: maybe}")
    assert "chat_completions_tools_require_none_reasoning: must be true or false" in str(caught.value)


def test_both_flags_on_one_entry_warn_that_the_narrower_one_has_no_effect(tmp_path):
    loaded = load_config(tmp_path, "{responses_only: true, chat_completions_tools_require_none_reasoning: true}")
    assert any("metadata.responses_only" in w and "has no effect" in w for w in loaded.warnings)
