"""The anthropic wire's translation tables, both ways: chat -> Messages request, Messages -> chat answer."""

import json

import attrs
import httpx
import pytest
import trio

from switchyard.actors.addressing import auth_headers
from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.actors.messages import Call
from switchyard.config.load import ConfigError, load_text
from switchyard.config.schema import BackendConfig, BackendType, ModelConfig, Snapshot
from switchyard.protocol.serving.wiring import WIRES
from switchyard.protocol.wires.anthropic import headers, messages_request
from switchyard.protocol.wires.anthropic_answer import (
    FINISH,
    StreamTranslator,
    chat_answer,
    chat_completion,
    finish_reason,
)
from switchyard.protocol.wires.translated import TranslatedStream
from switchyard.protocol.wires.upstream import in_process

BACKEND = BackendConfig(name="claude", type=BackendType.ANTHROPIC, url="https://api.anthropic.com",
                        api_key="sk-ant-test", models=("claude-x",))
NEW = attrs.evolve(BACKEND, anthropic_version="2026-10-21")


def call(payload=None, **extra) -> Call:
    payload = payload or {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}
    return Call(model=payload["model"], stream=bool(payload.get("stream")), body=json.dumps(payload).encode(),
                payload=payload, snapshot=Snapshot(), **extra)


def translate(backend=BACKEND, c=None, **fields):
    payload = {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}], **fields}
    return messages_request(payload, backend, c or call(payload))


def turns(*messages, **fields):
    return translate(messages=list(messages), **fields)


# --- the request ----------------------------------------------------------------------------

def test_the_anthropic_wire_is_chosen_for_chat_on_an_anthropic_backend():
    wire = WIRES.wire_for(call(), BACKEND, "claude-x")
    assert wire.path == "/v1/messages"
    sent = json.loads(wire.body(call().body, BACKEND, call()))
    assert sent == {"model": "claude-x", "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}


def test_system_and_developer_messages_are_hoisted_into_system_in_order():
    out = turns({"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                {"role": "developer", "content": [{"type": "text", "text": "Use French."}]})
    assert out["system"] == [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use French."}]
    assert out["messages"] == [{"role": "user", "content": "hi"}]


def test_one_plain_system_message_stays_a_string():
    assert turns({"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"})["system"] == "Be brief."


def test_consecutive_messages_of_one_role_merge_into_one_turn():
    out = turns({"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "b"}]},
                {"role": "assistant", "content": "c"})
    assert out["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "c"}]


def test_assistant_tool_calls_become_tool_use_and_tool_messages_one_user_turn_of_results():
    out = turns(
        {"role": "user", "content": "weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "t2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "18C"},
        {"role": "tool", "tool_call_id": "t2", "content": [{"type": "text", "text": "21C"}]},
        {"role": "user", "content": "thanks"})
    assert out["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "Rome"}}]}
    assert out["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "18C"},
        {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "21C"}]},
        {"type": "text", "text": "thanks"}]}


def test_tool_call_arguments_that_are_not_a_json_object_are_refused_naming_the_path():
    with pytest.raises(InvalidRequest) as err:
        turns({"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "[1, 2]"}}]})
    assert err.value.param == "messages[1].tool_calls[0].function.arguments"


def test_tool_call_arguments_nested_past_the_json_parser_are_refused_naming_the_path():
    deep = "[" * 5000 + "]" * 5000   # json.loads gives up with RecursionError, not ValueError
    with pytest.raises(InvalidRequest) as err:
        turns({"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": deep}}]})
    assert err.value.param == "messages[1].tool_calls[0].function.arguments"


def test_images_become_base64_or_url_image_blocks():
    out = turns({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "high"}},
        {"type": "text", "text": "what are these?"}]})
    assert out["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "what are these?"}]


def test_an_image_type_anthropic_does_not_take_is_refused():
    with pytest.raises(UnsupportedRequestParameter) as err:
        turns({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,AA=="}}]})
    assert err.value.param == "messages[0].content[0].image_url.url"


def test_an_inline_pdf_becomes_a_document_and_a_file_id_is_refused():
    pdf = {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}}
    out = turns({"role": "user", "content": [pdf]})
    assert out["messages"][0]["content"] == [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}]
    with pytest.raises(UnsupportedRequestParameter):
        turns({"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]})


def test_audio_content_is_refused_naming_the_part():
    with pytest.raises(UnsupportedRequestParameter) as err:
        turns({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]})
    assert err.value.param == "messages[0].content[0].type"


def test_tools_become_name_description_input_schema():
    params = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    out = translate(tools=[{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                                             "parameters": params}},
                           {"type": "function", "function": {"name": "now"}}])
    assert out["tools"] == [{"name": "get_weather", "description": "Weather.", "input_schema": params},
                            {"name": "now", "input_schema": {"type": "object", "properties": {}}}]


TOOLS = [{"type": "function", "function": {"name": "f"}}]


@pytest.mark.parametrize("choice, parallel, expected", [
    ("auto", None, {"type": "auto"}),
    ("required", None, {"type": "any"}),
    ("none", None, {"type": "none"}),
    ({"type": "function", "function": {"name": "f"}}, None, {"type": "tool", "name": "f"}),
    (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
    ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
    (None, None, None),
])
def test_tool_choice_table(choice, parallel, expected):
    out = translate(tools=TOOLS, tool_choice=choice, parallel_tool_calls=parallel)
    assert out.get("tool_choice") == expected


def test_max_tokens_from_max_completion_tokens_then_max_tokens_then_the_default():
    assert translate(max_completion_tokens=100)["max_tokens"] == 100
    assert translate(max_tokens=200)["max_tokens"] == 200
    assert translate()["max_tokens"] == 4096
    capped = attrs.evolve(BACKEND, model_configs={"claude-x": ModelConfig(max_output=1024)})
    assert translate(capped)["max_tokens"] == 1024


def test_max_tokens_and_max_completion_tokens_that_disagree_are_refused():
    with pytest.raises(InvalidRequest) as err:
        translate(max_tokens=10, max_completion_tokens=20)
    assert err.value.param == "max_completion_tokens"


def test_stop_becomes_stop_sequences():
    assert translate(stop="END")["stop_sequences"] == ["END"]
    assert translate(stop=["a", "b"])["stop_sequences"] == ["a", "b"]
    assert "stop_sequences" not in translate(stop=[])


def test_user_becomes_metadata_user_id_and_openai_metadata_is_refused():
    assert translate(user="u-1")["metadata"] == {"user_id": "u-1"}
    with pytest.raises(UnsupportedRequestParameter) as err:
        translate(metadata={"team": "x"})
    assert err.value.param == "metadata"


def test_sampling_fields_pass_before_anthropic_version_2026_10_21():
    out = translate(temperature=0.5, top_p=0.9, top_k=40)
    assert (out["temperature"], out["top_p"], out["top_k"]) == (0.5, 0.9, 40)


def test_client_sampling_fields_are_removed_from_anthropic_version_2026_10_21():
    out = translate(NEW, temperature=0.5, top_p=0.9, top_k=40, max_tokens=5)
    assert not {"temperature", "top_p", "top_k"} & set(out) and out["max_tokens"] == 5


def test_a_messages_clients_own_anthropic_version_decides_the_sampling_rule():
    payload = {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5}
    old_client = call(payload, ingress={"anthropic-version": "2023-06-01"})
    new_client = call(payload, ingress={"anthropic-version": "2026-10-21"})
    assert messages_request(payload, NEW, old_client)["temperature"] == 0.5
    assert "temperature" not in messages_request(payload, BACKEND, new_client)


def test_a_policy_written_sampling_field_is_refused_from_2026_10_21_naming_the_version():
    payload = {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.2}
    with pytest.raises(UnsupportedRequestParameter) as err:
        messages_request(payload, NEW, call(payload, managed_params=frozenset({"temperature"})))
    assert err.value.param == "temperature" and "anthropic-version 2026-10-21" in err.value.message


@pytest.mark.parametrize("field, value", [
    ("n", 2), ("logprobs", True), ("presence_penalty", 0.5), ("frequency_penalty", 1), ("logit_bias", {"1": 2}),
    ("seed", 7), ("store", True), ("modalities", ["text", "audio"]), ("audio", {"voice": "x"}),
    ("function_call", "auto"), ("min_p", 0.1),
])
def test_chat_fields_messages_cannot_carry_are_refused_naming_them(field, value):
    with pytest.raises(UnsupportedRequestParameter) as err:
        translate(**{field: value})
    assert err.value.param == field


def test_chat_fields_at_the_value_that_asks_for_nothing_are_accepted():
    out = translate(n=1, logprobs=False, presence_penalty=0, frequency_penalty=0.0, seed=None, store=False)
    assert set(out) == {"model", "max_tokens", "messages"}


def test_anthropics_own_fields_pass_as_they_are():
    thinking = {"type": "enabled", "budget_tokens": 2048}
    assert translate(thinking=thinking, service_tier="auto")["thinking"] == thinking


def test_response_format_json_schema_and_reasoning_effort_become_output_config():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    out = translate(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
                    reasoning_effort="high")
    assert out["output_config"] == {"format": {"type": "json_schema", "schema": schema}, "effort": "high"}
    assert "output_config" not in translate(response_format={"type": "text"})


def test_json_object_mode_and_an_unknown_effort_are_refused():
    with pytest.raises(UnsupportedRequestParameter):
        translate(response_format={"type": "json_object"})
    with pytest.raises(UnsupportedRequestParameter):
        translate(reasoning_effort="minimal")


def test_stream_is_kept_and_stream_options_are_ours():
    out = translate(stream=True, stream_options={"include_usage": True})
    assert out["stream"] is True and "stream_options" not in out


def test_headers_carry_x_api_key_and_the_backends_version_never_a_bearer_token():
    sent = dict(headers(BACKEND, call()))
    assert sent == {"content-type": "application/json", "x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


def test_headers_carry_a_messages_clients_version_and_beta():
    c = call(ingress={"anthropic-version": "2024-01-01", "anthropic-beta": "prompt-caching-2024-07-31"})
    sent = dict(headers(NEW, c))
    assert sent["anthropic-version"] == "2024-01-01" and sent["anthropic-beta"] == "prompt-caching-2024-07-31"


# --- the answer -----------------------------------------------------------------------------

@pytest.mark.parametrize("stop_reason, expected", [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("pause_turn", "stop"), ("max_tokens", "length"),
    ("model_context_window_exceeded", "length"), ("tool_use", "tool_calls"), ("refusal", "content_filter"),
    (None, "stop"),
])
def test_stop_reason_table(stop_reason, expected):
    assert finish_reason(stop_reason) == expected
    assert stop_reason is None or FINISH[stop_reason] == expected


def test_a_message_becomes_a_chat_completion():
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "thinking", "thinking": "Hmm.", "signature": "s"},
                           {"type": "text", "text": "Let me check. "},
                           {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                           {"type": "text", "text": "One moment."}],
               "stop_reason": "tool_use", "stop_sequence": None,
               "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 2,
                         "cache_read_input_tokens": 3}}
    out = chat_completion(message, created=1)
    assert out["object"] == "chat.completion" and out["id"] == "msg_1" and out["model"] == "claude-x"
    assert out["choices"] == [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": "Let me check. One moment.", "reasoning_content": "Hmm.",
        "reasoning_blocks": [{"type": "thinking", "thinking": "Hmm.", "signature": "s"}],
        "tool_calls": [{"id": "toolu_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}}]
    assert out["usage"] == {"prompt_tokens": 15, "completion_tokens": 5, "total_tokens": 20,
                            "prompt_tokens_details": {"cached_tokens": 3, "cache_write_tokens": 2}}


def test_a_tool_only_message_has_null_content():
    out = chat_completion({"content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
                           "stop_reason": "tool_use"}, created=1)
    assert out["choices"][0]["message"]["content"] is None


def sse(*events) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


TRANSCRIPT = sse(
    {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                          "model": "claude-x", "usage": {"input_tokens": 9, "output_tokens": 1}}},
    {"type": "ping"},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking."}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2,
     "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"city":'}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ' "Paris"}'}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
     "usage": {"output_tokens": 12}},
    {"type": "message_stop"},
)


def chunks(out: list[bytes]) -> list:
    events = b"".join(out).split(b"\n\n")
    return [e[6:] if e == b"data: [DONE]" else json.loads(e[6:]) if e.startswith(b"data: ") else e
            for e in events if e]


def test_a_stream_becomes_chat_chunks_with_tool_call_deltas_finish_usage_and_done():
    t = StreamTranslator(include_usage=True, created=1)
    out = chunks(t.feed(TRANSCRIPT) + t.close())
    assert out[0] == b": ping"
    deltas = [c["choices"][0]["delta"] for c in out[1:-3]]
    assert deltas == [
        {"role": "assistant", "reasoning_content": "Hmm."},
        {"reasoning_signature": "s"},
        {"content": "Checking."},
        {"tool_calls": [{"index": 0, "id": "toolu_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}]
    assert all(c["id"] == "msg_1" and c["model"] == "claude-x" and c["object"] == "chat.completion.chunk"
               for c in out[1:-1])
    assert out[-3]["choices"][0]["finish_reason"] == "tool_calls"
    assert out[-2]["choices"] == [] and out[-2]["usage"] == {"prompt_tokens": 9, "completion_tokens": 12,
                                                             "total_tokens": 21}
    assert out[-1] == b"[DONE]"


def test_a_stream_split_at_every_byte_translates_the_same():
    whole = StreamTranslator(include_usage=False, created=1)
    expected = whole.feed(TRANSCRIPT) + whole.close()
    split = StreamTranslator(include_usage=False, created=1)
    out = [o for i in range(len(TRANSCRIPT)) for o in split.feed(TRANSCRIPT[i:i + 1])] + split.close()
    assert b"".join(out) == b"".join(expected)
    assert b'"usage"' not in b"".join(out)   # not asked for


def test_an_error_event_becomes_the_relays_in_band_error():
    t = StreamTranslator(include_usage=False, created=1)
    out = chunks(t.feed(TRANSCRIPT[:TRANSCRIPT.index(b"event: content_block_stop")] + sse(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})))
    assert out[-1] == {"error": {"message": "Overloaded", "type": "overloaded_error", "code": "overloaded_error"}}
    assert t.feed(sse({"type": "message_stop"})) == []


def test_a_message_stop_without_a_stop_reason_is_an_error_not_done():
    t = StreamTranslator(include_usage=False, created=1)
    out = chunks(t.feed(sse({"type": "message_start", "message": {"id": "m", "model": "x"}},
                            {"type": "message_stop"})))
    assert out[-1]["error"]["code"] == "upstream_stream_truncated"


def test_an_event_that_is_not_json_is_passed_on_for_the_relay_to_judge():
    t = StreamTranslator(include_usage=False, created=1)
    assert t.feed(b"event: content_block_delta\ndata: {broken\n\n") == [b"data: {broken\n\n"]


def test_an_error_status_passes_untouched():
    response = httpx.Response(400, json={"type": "error", "error": {"type": "invalid_request_error", "message": "x"}})
    assert chat_answer(response, call()) is response


class _Body(httpx.AsyncByteStream):
    def __init__(self, parts):
        self.parts, self.closed = parts, False

    async def __aiter__(self):
        for part in self.parts:
            if part is None:
                await trio.sleep_forever()
            yield part

    async def aclose(self):
        self.closed = True


async def test_a_translated_stream_closes_the_backends_response_when_closed_mid_read(autojump_clock):
    body = _Body([TRANSCRIPT[:TRANSCRIPT.index(b"event: content_block_stop")], None])
    upstream = httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)
    answer = chat_answer(upstream, call())
    assert isinstance(answer.stream, TranslatedStream)
    got = []
    with trio.move_on_after(5):
        async for chunk in answer.aiter_raw():
            got.append(chunk)
    assert b"Hmm." in b"".join(got) and not body.closed   # cancelled mid-read: nothing closed behind our back
    await answer.aclose()
    assert body.closed


async def test_a_buffered_answer_is_translated_when_read():
    message = {"id": "msg_1", "type": "message", "model": "claude-x", "content": [{"type": "text", "text": "hi"}],
               "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}
    answer = chat_answer(httpx.Response(200, json=message), call())
    out = json.loads(await answer.aread())
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert answer.headers["content-type"] == "application/json"


# --- the backend's configuration -------------------------------------------------------------

def load_backend(line: str):
    return load_text("backends:\n  - " + line).snapshot.backends[0]


def config_errors(line: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_text("backends:\n  - " + line)
    return err.value.errors


def test_anthropic_version_defaults_to_2023_06_01_and_reads_an_unquoted_yaml_date():
    assert load_backend("{name: c, type: anthropic, models: [m]}").anthropic_version == "2023-06-01"
    assert load_backend("{name: c, type: anthropic, models: [m], anthropic_version: 2026-10-21}"
                        ).anthropic_version == "2026-10-21"


def test_anthropic_version_must_be_a_real_date():
    assert config_errors('{name: c, type: anthropic, models: [m], anthropic_version: "2023-13-01"}') == [
        "backends[0].anthropic_version: must be a real calendar date YYYY-MM-DD, got '2023-13-01'"]
    assert config_errors("{name: c, type: anthropic, models: [m], anthropic_version: latest}") == [
        "backends[0].anthropic_version: must be a date YYYY-MM-DD such as 2023-06-01, got 'latest'"]


def test_anthropic_version_on_another_backend_type_is_an_error():
    assert config_errors("{name: o, type: openai, url: 'http://o', models: [m], anthropic_version: 2023-06-01}") == [
        "backends[0].anthropic_version: only applies to backends of type anthropic, not openai"]


def test_an_anthropic_backend_without_url_is_anthropics_api():
    assert load_backend("{name: c, type: anthropic, models: [m]}").url == "https://api.anthropic.com"


def test_a_simulation_only_on_an_anthropic_backend_served_in_process():
    sim = load_backend("{name: c, type: anthropic, url: 'http://c.simulated', models: [m], simulation: {chunks: 2}}")
    assert in_process(sim) and sim.simulation.chunks == 2
    assert not in_process(load_backend("{name: c, type: anthropic, models: [m]}"))
    assert config_errors("{name: c, type: anthropic, models: [m], simulation: {chunks: 2}}") == [
        "backends[0].simulation: is only allowed on an anthropic backend whose url host ends in .simulated"]


def test_health_checks_and_discovery_use_x_api_key_and_anthropic_version():
    assert auth_headers(NEW) == [("x-api-key", "sk-ant-test"), ("anthropic-version", "2026-10-21")]
    assert auth_headers(attrs.evolve(BACKEND, api_key=None)) == [("anthropic-version", "2023-06-01")]


def test_a_messages_clients_thinking_config_replaces_the_effort_made_up_from_it():
    thinking = {"type": "enabled", "budget_tokens": 2048}
    payload = {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "medium"}
    c = call(payload, ingress={"api": "anthropic", "thinking": thinking, "derived": ("reasoning_effort",)})
    out = messages_request(payload, BACKEND, c)
    assert out["thinking"] == thinking and "output_config" not in out


def test_a_content_block_event_without_an_index_fails_the_attempt_instead_of_crashing():
    t = StreamTranslator(include_usage=False, created=1)
    out = chunks(t.feed(sse({"type": "content_block_start", "index": {"x": 1},
                             "content_block": {"type": "tool_use", "id": "t", "name": "f"}})))
    assert out[-1]["error"]["code"] == "upstream_malformed_event"
