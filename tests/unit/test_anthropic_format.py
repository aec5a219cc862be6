"""Messages <-> Chat Completions translation tables: the request, the answer, the stream, the errors."""

import json

import pytest

from switchyard.actors.errors import (
    InvalidRequest,
    NoHealthyBackend,
    UpstreamProtocolError,
    UpstreamStatusError,
)
from switchyard.protocol.doors.anthropic_errors import anthropic_envelope, anthropic_error_type
from switchyard.protocol.doors.anthropic_format import effort_for_budget, to_chat
from switchyard.protocol.doors.anthropic_sink import StreamTranslator, message_from_chat


def body(*messages, **extra):
    return {"model": "demo", "max_tokens": 64, "messages": list(messages) or [{"role": "user", "content": "hi"}],
            **extra}


def user(*content):
    return {"role": "user", "content": list(content)}


def assistant(*content):
    return {"role": "assistant", "content": list(content)}


def text(t):
    return {"type": "text", "text": t}


def refused(payload, **kw):
    with pytest.raises(InvalidRequest) as info:
        to_chat(payload, **kw)
    return info.value


# --- the request ---------------------------------------------------------------------------

def test_system_string_becomes_the_first_system_message():
    chat = to_chat(body(system="Be brief.")).payload
    assert chat["messages"][0] == {"role": "system", "content": "Be brief."}


def test_system_text_blocks_join_with_newlines():
    chat = to_chat(body(system=[text("One."), {**text("Two."), "cache_control": {"type": "ephemeral"}}])).payload
    assert chat["messages"][0] == {"role": "system", "content": "One.\nTwo."}


def test_user_text_blocks_join_into_one_string():
    assert to_chat(body(user(text("a"), text("b")))).payload["messages"] == [{"role": "user", "content": "a\nb"}]


def test_base64_image_becomes_a_data_url_part():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assert to_chat(body(user(text("what is it?"), image))).payload["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}]


def test_url_image_becomes_an_image_url_part():
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}
    part = to_chat(body(user(image))).payload["messages"][0]["content"][0]
    assert part == {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}


def test_assistant_tool_use_becomes_tool_calls():
    turn = assistant(text("Let me look."), {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                            "input": {"city": "Paris"}})
    assert to_chat(body(user(text("weather?")), turn)).payload["messages"][1] == {
        "role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}


def test_tool_results_become_tool_messages_before_the_rest_of_the_turn():
    turn = user({"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [text("rain"), text("later")]},
                text("thanks"))
    assert to_chat(body(turn)).payload["messages"] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "rain\nlater"},
        {"role": "user", "content": "thanks"}]


def test_tool_result_error_is_marked_in_its_text():
    turn = user({"type": "tool_result", "tool_use_id": "t", "content": "no such city", "is_error": True})
    assert to_chat(body(turn)).payload["messages"][0]["content"] == "Error: no such city"


def test_tool_result_after_other_content_is_refused():
    err = refused(body(user(text("x"), {"type": "tool_result", "tool_use_id": "t", "content": "y"})))
    assert err.param == "messages.0.content.1"


def test_an_image_inside_a_tool_result_is_accepted_and_listed_as_uncarried():
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    out = to_chat(body(user({"type": "tool_result", "tool_use_id": "t", "content": [text("done"), image]})))
    assert out.payload["messages"][0] == {"role": "tool", "tool_call_id": "t", "content": "done"}
    assert out.uncarried == (("messages.0.content.0.content.1", "an 'image' block in a tool_result"),)


def test_a_malformed_image_inside_a_tool_result_is_refused_by_path():
    bad = {"type": "image", "source": {"type": "file"}}
    err = refused(body(user({"type": "tool_result", "tool_use_id": "t", "content": [bad]})))
    assert err.param == "messages.0.content.0.content.0.source.type"


def test_a_document_block_is_accepted_and_listed_as_uncarried():
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}
    assert to_chat(body(user(doc, text("Sum up.")))).uncarried == (("messages.0.content.0", "a 'document' block"),)


def test_a_document_source_missing_its_data_is_refused_by_path():
    err = refused(body(user({"type": "document", "source": {"type": "base64", "media_type": "application/pdf"}})))
    assert err.param == "messages.0.content.0.source.data"


def test_thinking_blocks_of_earlier_turns_are_left_out():
    turn = assistant({"type": "thinking", "thinking": "hmm", "signature": "sig"},
                     {"type": "redacted_thinking", "data": "xyz"}, text("Hi."))
    assert to_chat(body(user(text("hi")), turn)).payload["messages"][1] == {"role": "assistant", "content": "Hi."}


def test_system_role_message_stays_in_place():
    chat = to_chat(body({"role": "user", "content": "a"}, {"role": "system", "content": [text("rule")]})).payload
    assert chat["messages"][1] == {"role": "system", "content": "rule"}


def test_tools_become_function_tools():
    tools = [{"name": "get_weather", "description": "Weather now", "strict": True,
              "cache_control": {"type": "ephemeral"},
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    assert to_chat(body(tools=tools)).payload["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather now", "strict": True,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


TOOLS = [{"name": "get_weather", "input_schema": {"type": "object"}}]


@pytest.mark.parametrize("choice, expected", [
    ({"type": "auto"}, "auto"),
    ({"type": "any"}, "required"),
    ({"type": "none"}, "none"),
    ({"type": "tool", "name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
])
def test_tool_choice_table(choice, expected):
    assert to_chat(body(tools=TOOLS, tool_choice=choice)).payload["tool_choice"] == expected


def test_disable_parallel_tool_use_turns_parallel_calls_off():
    chat = to_chat(body(tools=TOOLS, tool_choice={"type": "any", "disable_parallel_tool_use": True})).payload
    assert chat["parallel_tool_calls"] is False


def test_tool_choice_naming_an_unknown_tool_is_refused():
    assert refused(body(tools=TOOLS, tool_choice={"type": "tool", "name": "nope"})).param == "tool_choice.name"


def test_sampling_and_limits_map_to_their_chat_fields():
    chat = to_chat(body(stop_sequences=["END"], temperature=0.2, top_p=0.9, top_k=40,
                        metadata={"user_id": "u-1"})).payload
    assert {k: chat[k] for k in ("max_tokens", "stop", "temperature", "top_p", "top_k", "user")} == {
        "max_tokens": 64, "stop": ["END"], "temperature": 0.2, "top_p": 0.9, "top_k": 40, "user": "u-1"}


def test_stream_asks_for_usage():
    chat = to_chat(body(stream=True)).payload
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("budget, effort", [(1024, "low"), (4095, "low"), (4096, "medium"), (16384, "high")])
def test_thinking_budget_becomes_a_reasoning_effort(budget, effort):
    assert effort_for_budget(budget) == effort
    translated = to_chat(body(thinking={"type": "enabled", "budget_tokens": budget}))
    assert translated.payload["reasoning_effort"] == effort
    assert translated.thinking == {"type": "enabled", "budget_tokens": budget}
    assert translated.derived == ("reasoning_effort",)


def test_the_clients_own_effort_wins_and_is_not_derived():
    translated = to_chat(body(thinking={"type": "enabled", "budget_tokens": 2048}, output_config={"effort": "max"}))
    assert (translated.payload["reasoning_effort"], translated.derived) == ("max", ())


def test_adaptive_and_disabled_thinking_set_no_effort():
    for thinking in ({"type": "adaptive"}, {"type": "disabled"}):
        assert "reasoning_effort" not in to_chat(body(thinking=thinking)).payload


def test_thinking_display_omitted_hides_reasoning():
    assert to_chat(body(thinking={"type": "adaptive", "display": "omitted"})).show_thinking is False


def test_output_config_maps_to_effort_and_response_format():
    chat = to_chat(body(output_config={"effort": "high", "format": {"type": "json_schema",
                                                                     "schema": {"type": "object"}}})).payload
    assert chat["reasoning_effort"] == "high"
    assert chat["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "output", "schema": {"type": "object"}}}


@pytest.mark.parametrize("missing", ["model", "max_tokens", "messages"])
def test_required_fields_are_named(missing):
    payload = body()
    del payload[missing]
    err = refused(payload)
    assert (err.param, err.status, err.message) == (missing, 400, f"{missing}: Field required")


@pytest.mark.parametrize("payload, path", [
    (body({"role": "tool", "content": "x"}), "messages.0.role"),
    (body({"role": "user", "content": 5}), "messages.0.content"),
    (body(user({"type": "video"})), "messages.0.content.0.type"),
    (body(user({"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": ""}})),
     "messages.0.content.0.source.media_type"),
    (body(user({"type": "image", "source": {"type": "file", "file_id": "f"}})), "messages.0.content.0.source.type"),
    (body(assistant({"type": "tool_use", "id": "t", "name": "n", "input": []})), "messages.0.content.0.input"),
    (body(user({"type": "tool_use", "id": "t", "name": "n", "input": {}})), "messages.0.content.0.type"),
    (body(temperature=1.5), "temperature"),
    (body(top_k=-1), "top_k"),
    ({**body(), "max_tokens": 0}, "max_tokens"),
    (body(stop_sequences="END"), "stop_sequences"),
    (body(metadata={"user_id": 7}), "metadata.user_id"),
    (body(tools=[{"name": "x"}]), "tools.0.input_schema"),
    (body(tool_choice={"type": "maybe"}), "tool_choice.type"),
    (body(thinking={"type": "enabled", "budget_tokens": 100}), "thinking.budget_tokens"),
    (body(stream="yes"), "stream"),
])
def test_errors_name_the_field_path(payload, path):
    err = refused(payload)
    assert err.param == path and err.message.startswith(path + ": ")


def test_unknown_fields_are_refused_like_the_messages_api_refuses_them():
    assert refused(body(provider={"order": ["a"]})).message == "provider: Extra inputs are not permitted"
    assert refused(body(user({**text("x"), "colour": "red"}))).param == "messages.0.content.0.colour"


def test_fields_no_backend_can_carry_are_refused_by_name():
    err = refused(body(container="c-1"))
    assert err.param == "container" and "not supported" in err.message


def test_server_tools_are_refused():
    err = refused(body(tools=[{"type": "web_search_20250305", "name": "web_search"}]))
    assert err.param == "tools.0.type"


def test_count_tokens_bodies_need_no_max_tokens_and_take_no_stream():
    payload = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}
    assert "max_tokens" not in to_chat(payload, count_only=True).payload
    assert refused({**payload, "stream": True}, count_only=True).param == "stream"


# --- the buffered answer --------------------------------------------------------------------

def chat_answer(message, finish="stop", **choice):
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "up",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish, **choice}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}}


def test_buffered_answer_becomes_a_message():
    assert message_from_chat(chat_answer({"content": "Hi there."}), message_id="msg_1", model="demo") == {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "demo",
        "content": [{"type": "text", "text": "Hi there."}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5}}


def test_tool_calls_become_tool_use_blocks_with_parsed_input():
    answer = chat_answer({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": ""}}]}, finish="tool_calls")
    message = message_from_chat(answer, message_id="m", model="demo")
    assert message["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "now", "input": {}}]
    assert message["stop_reason"] == "tool_use"


@pytest.mark.parametrize("finish, reason", [("stop", "end_turn"), ("length", "max_tokens"),
                                            ("tool_calls", "tool_use"), ("content_filter", "refusal"),
                                            (None, "end_turn")])
def test_stop_reason_table(finish, reason):
    assert message_from_chat(chat_answer({"content": "x"}, finish), message_id="m", model="d")["stop_reason"] == reason


def test_stop_sequence_when_the_server_names_it():
    answer = chat_answer({"content": "x"}, stop_reason="END")
    message = message_from_chat(answer, message_id="m", model="d", stop_sequences=("END",))
    assert (message["stop_reason"], message["stop_sequence"]) == ("stop_sequence", "END")


def test_tool_calls_that_end_with_stop_are_tool_use():
    answer = chat_answer({"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}, "stop")
    assert message_from_chat(answer, message_id="m", model="d")["stop_reason"] == "tool_use"


def test_refusal_becomes_text_with_stop_reason_refusal():
    message = message_from_chat(chat_answer({"content": None, "refusal": "I can't."}), message_id="m", model="d")
    assert message["content"] == [{"type": "text", "text": "I can't."}] and message["stop_reason"] == "refusal"


def test_cached_prompt_tokens_are_cache_reads_not_input():
    answer = chat_answer({"content": "x"})
    answer["usage"]["prompt_tokens_details"] = {"cached_tokens": 10}
    assert message_from_chat(answer, message_id="m", model="d")["usage"] == {
        "input_tokens": 2, "output_tokens": 5, "cache_read_input_tokens": 10}


def test_reasoning_becomes_a_thinking_block_first():
    answer = chat_answer({"content": "42", "reasoning_content": "6 x 7"})
    assert message_from_chat(answer, message_id="m", model="d")["content"] == [
        {"type": "thinking", "thinking": "6 x 7", "signature": ""}, {"type": "text", "text": "42"}]
    hidden = message_from_chat(answer, message_id="m", model="d", show_thinking=False)
    assert hidden["content"] == [{"type": "text", "text": "42"}]


def test_tool_arguments_that_are_no_json_object_are_a_protocol_error():
    answer = chat_answer({"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1, 2"}}]})
    with pytest.raises(UpstreamProtocolError):
        message_from_chat(answer, message_id="m", model="d")


# --- the stream -----------------------------------------------------------------------------

def decode(raw: bytes):
    out = []
    for block in raw.decode().split("\n\n"):
        if block:
            name, data = block.split("\n")
            assert name.startswith("event: ") and data.startswith("data: ")
            payload = json.loads(data[6:])
            assert payload["type"] == name[7:]
            out.append(payload)
    return out


def chunk(delta=None, finish=None, usage=None):
    obj = {"id": "c", "object": "chat.completion.chunk", "model": "up",
           "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if delta is not None or finish
           else []}
    if usage is not None:
        obj["usage"] = usage
    return obj


def run(*chunks, **kw):
    t = StreamTranslator("msg_1", "demo", **kw)
    raw = t.begin() + b"".join(t.feed(c) for c in chunks) + t.end()
    return decode(raw)


def test_stream_event_sequence_for_text():
    events = run(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), chunk({"content": "lo"}),
                 chunk({}, "stop"), chunk(usage={"prompt_tokens": 9, "completion_tokens": 2}))
    assert [e["type"] for e in events] == ["message_start", "ping", "content_block_start", "content_block_delta",
                                           "content_block_delta", "content_block_stop", "message_delta",
                                           "message_stop"]
    assert events[0]["message"]["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert events[2]["content_block"] == {"type": "text", "text": ""}
    assert [e["delta"]["text"] for e in events[3:5]] == ["Hel", "lo"]
    assert events[6] == {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                         "usage": {"input_tokens": 9, "output_tokens": 2}}


def test_stream_blocks_follow_each_other_thinking_text_tool():
    events = run(chunk({"reasoning_content": "hmm"}), chunk({"content": "Checking."}),
                 chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                        "function": {"name": "get_weather", "arguments": ""}}]}),
                 chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
                 chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
                 chunk({}, "tool_calls"))
    shape = [(e["type"], e.get("index"), (e.get("delta") or e.get("content_block") or {}).get("type"))
             for e in events[2:]]
    assert shape == [("content_block_start", 0, "thinking"), ("content_block_delta", 0, "thinking_delta"),
                     ("content_block_stop", 0, None),
                     ("content_block_start", 1, "text"), ("content_block_delta", 1, "text_delta"),
                     ("content_block_stop", 1, None),
                     ("content_block_start", 2, "tool_use"), ("content_block_delta", 2, "input_json_delta"),
                     ("content_block_delta", 2, "input_json_delta"), ("content_block_stop", 2, None),
                     ("message_delta", None, None), ("message_stop", None, None)]
    assert events[2]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert events[8]["content_block"] == {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}
    assert "".join(e["delta"]["partial_json"] for e in events[9:11]) == '{"city":"Paris"}'
    assert events[-2]["delta"]["stop_reason"] == "tool_use"


def test_stream_thinking_omitted_sends_no_thinking_block():
    events = run(chunk({"reasoning_content": "hmm"}), chunk({"content": "x"}), chunk({}, "stop"),
                 show_thinking=False)
    assert [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"] == ["text"]


def test_stream_without_usage_reports_zero_tokens():
    assert run(chunk({"content": "x"}), chunk({}, "length"))[-2]["usage"] == {"input_tokens": 0, "output_tokens": 0}


def test_stream_ends_once():
    t = StreamTranslator("m", "d")
    t.begin()
    assert t.end() and t.end() == b"" and t.feed(chunk({"content": "late"})) == b""


# --- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("status, kind", [(400, "invalid_request_error"), (401, "authentication_error"),
                                          (403, "permission_error"), (404, "not_found_error"),
                                          (405, "invalid_request_error"), (413, "request_too_large"),
                                          (429, "rate_limit_error"), (500, "api_error"), (502, "api_error"),
                                          (503, "overloaded_error"), (504, "api_error"), (529, "overloaded_error")])
def test_anthropic_error_type_table(status, kind):
    assert anthropic_error_type(status) == kind


def test_our_errors_keep_their_message_and_status_type():
    assert anthropic_envelope(NoHealthyBackend("all down"), "req_1") == {
        "type": "error", "error": {"type": "overloaded_error", "message": "all down"}, "request_id": "req_1"}


def test_a_backends_openai_error_keeps_its_message():
    err = UpstreamStatusError("a", 429, b'{"error": {"message": "slow down", "type": "rate"}}', b"application/json")
    assert anthropic_envelope(err)["error"] == {"type": "rate_limit_error", "message": "slow down"}


def test_a_native_anthropic_error_passes_as_it_came():
    raw = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_x"}
    err = UpstreamStatusError("a", 529, json.dumps(raw).encode(), b"application/json")
    assert anthropic_envelope(err, "req_ours") == raw


def test_a_non_json_backend_error_is_quoted():
    err = UpstreamStatusError("a", 502, b"<html>bad gateway</html>", b"text/html")
    assert anthropic_envelope(err)["error"]["message"] == "Backend 'a' answered HTTP 502: <html>bad gateway</html>"


def test_thinking_blocks_come_back_one_by_one_with_signatures_even_when_display_is_omitted():
    blocks = [{"type": "thinking", "thinking": "a", "signature": "s1"}, {"type": "redacted_thinking", "data": "r"},
              {"type": "thinking", "thinking": "b", "signature": "s2"}]
    chat = {"choices": [{"message": {"role": "assistant", "content": "ok", "reasoning_content": "ab",
                                     "reasoning_blocks": blocks}, "finish_reason": "stop"}]}
    shown = message_from_chat(chat, message_id="msg_1", model="m")["content"]
    assert shown[:3] == blocks and shown[3] == {"type": "text", "text": "ok"}
    omitted = message_from_chat(chat, message_id="msg_1", model="m", show_thinking=False)["content"]
    assert [b.get("signature") for b in omitted[:3]] == ["s1", None, "s2"]
    assert omitted[0]["thinking"] == "" and omitted[1] == {"type": "redacted_thinking", "data": "r"}
