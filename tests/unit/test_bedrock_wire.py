"""The bedrock wire's translation rules, each way (protocol/wires/bedrock_converse.py, bedrock_answer.py)."""

from __future__ import annotations

import json

import pytest

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.protocol.wires.bedrock import STATUS, ErrorTranslator, model_path
from switchyard.protocol.wires.bedrock_answer import BufferedTranslator, StreamTranslator, chat_usage
from switchyard.protocol.wires.bedrock_converse import converse_request
from tests.bedrock_fake import event, exception

USER = {"role": "user", "content": "hi"}


def events(out: list[bytes]) -> list[dict | str]:
    found: list[dict | str] = []
    for raw in b"".join(out).split(b"\n\n"):
        if raw.startswith(b"data: "):
            data = raw[len(b"data: "):].decode()
            found.append(data if data == "[DONE]" else json.loads(data))
    return found


def test_the_model_id_is_url_encoded_in_the_path():
    assert model_path("anthropic.claude-3-5-haiku-20241022-v1:0", stream=True) == \
        "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
    assert model_path("arn:aws:bedrock:us-east-1:1:inference-profile/x", stream=False) == \
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse"


def test_system_and_developer_messages_become_system_blocks_and_same_role_turns_merge():
    body = converse_request({"model": "m", "messages": [
        {"role": "system", "content": "A."}, USER, {"role": "developer", "content": [{"type": "text", "text": "B."}]},
        {"role": "user", "content": "again"}]})
    assert body == {"system": [{"text": "A."}, {"text": "B."}],
                    "messages": [{"role": "user", "content": [{"text": "hi"}, {"text": "again"}]}]}


def test_tool_results_come_first_in_their_user_turn():
    body = converse_request({"model": "m", "tools": [{"type": "function", "function": {"name": "f"}}], "messages": [
        USER, {"role": "assistant", "tool_calls": [{"id": "t1", "type": "function",
                                                    "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "42"}, {"role": "user", "content": "and?"}]})
    assert body["messages"][2]["content"] == [{"toolResult": {"toolUseId": "t1", "content": [{"text": "42"}]}},
                                              {"text": "and?"}]


def test_stop_sampling_and_max_tokens_go_to_inference_config_and_top_k_to_the_models_fields():
    body = converse_request({"model": "m", "messages": [USER], "stop": "END", "max_completion_tokens": 9,
                             "temperature": 0, "top_p": 1, "top_k": 5})
    assert body["inferenceConfig"] == {"maxTokens": 9, "temperature": 0, "topP": 1, "stopSequences": ["END"]}
    assert body["additionalModelRequestFields"] == {"top_k": 5}


def test_metadata_and_user_become_request_metadata():
    body = converse_request({"model": "m", "messages": [USER], "metadata": {"team": "a"}, "user": "u-1"})
    assert body["requestMetadata"] == {"team": "a", "user": "u-1"}


@pytest.mark.parametrize(("field", "value"), [("n", 2), ("logprobs", True), ("reasoning_effort", "low"),
                                              ("seed", 1), ("parallel_tool_calls", False),
                                              ("response_format", {"type": "json_object"}), ("frobnicate", 1)])
def test_what_converse_cannot_carry_is_refused_by_name(field, value):
    with pytest.raises(UnsupportedRequestParameter) as caught:
        converse_request({"model": "m", "messages": [USER], field: value})
    assert caught.value.param == field


def test_a_neutral_value_is_accepted():
    assert converse_request({"model": "m", "messages": [USER], "n": 1, "logprobs": False})["messages"]


def test_tool_choice_none_offers_no_tools_unless_the_conversation_holds_tool_calls():
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert "toolConfig" not in converse_request({"model": "m", "messages": [USER], "tools": tools,
                                                 "tool_choice": "none"})
    history = [USER, {"role": "assistant", "tool_calls": [{"id": "t", "function": {"name": "f", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "t", "content": "x"}]
    with pytest.raises(UnsupportedRequestParameter):
        converse_request({"model": "m", "messages": history, "tools": tools, "tool_choice": "none"})


def test_a_named_tool_choice_is_a_tool_choice_of_that_tool():
    body = converse_request({"model": "m", "messages": [USER], "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}}})
    assert body["toolConfig"] == {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}],
                                  "toolChoice": {"tool": {"name": "f"}}}


def test_tool_call_arguments_that_are_not_a_json_object_are_refused():
    with pytest.raises(InvalidRequest) as caught:
        converse_request({"model": "m", "messages": [USER, {"role": "assistant", "tool_calls": [
            {"id": "t", "function": {"name": "f", "arguments": "[1]"}}]}]})
    assert caught.value.param == "messages[1].tool_calls[0].function.arguments"


def test_tool_call_arguments_nested_past_the_json_parser_are_refused():
    deep = "[" * 5000 + "]" * 5000   # json.loads gives up with RecursionError, not ValueError
    with pytest.raises(InvalidRequest) as caught:
        converse_request({"model": "m", "messages": [USER, {"role": "assistant", "tool_calls": [
            {"id": "t", "function": {"name": "f", "arguments": deep}}]}]})
    assert caught.value.param == "messages[1].tool_calls[0].function.arguments"


@pytest.mark.parametrize("calls", [{"id": "t"}, "t", 5])
def test_tool_calls_that_are_not_an_array_are_refused_never_dropped(calls):
    with pytest.raises(InvalidRequest) as caught:
        converse_request({"model": "m", "messages": [USER, {"role": "assistant", "content": "a", "tool_calls": calls}]})
    assert caught.value.param == "messages[1].tool_calls"


@pytest.mark.parametrize(("stop", "finish"), [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
                                              ("tool_use", "tool_calls"), ("guardrail_intervened", "content_filter"),
                                              ("content_filtered", "content_filter")])
def test_stop_reasons_map_to_finish_reasons(stop, finish):
    answer = {"output": {"message": {"role": "assistant", "content": [{"text": "x"}]}}, "stopReason": stop,
              "usage": {"inputTokens": 1, "outputTokens": 1}}
    translator = BufferedTranslator("m", "rid", 0)
    translator.feed(json.dumps(answer).encode())
    assert json.loads(translator.close()[0])["choices"][0]["finish_reason"] == finish


def test_cache_reads_and_writes_are_prompt_tokens():
    assert chat_usage({"inputTokens": 3, "outputTokens": 2, "cacheReadInputTokens": 10, "cacheWriteInputTokens": 5}) \
        == {"prompt_tokens": 18, "completion_tokens": 2, "total_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 5}}


def test_reasoning_deltas_become_reasoning_content():
    out = StreamTranslator("m", None, False, 0).feed(
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hmm"}}}))
    assert events(out)[0]["choices"][0]["delta"] == {"role": "assistant", "reasoning_content": "hmm"}


def test_an_exception_frame_is_an_in_band_error_and_ends_the_stream():
    translator = StreamTranslator("m", None, False, 0)
    out = translator.feed(event("messageStart", {"role": "assistant"}) + exception("throttlingException", "slow") +
                          event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "late"}}))
    [error] = events(out)
    assert error["error"]["code"] == "throttlingException" and "slow" in error["error"]["message"]


def test_a_frame_failing_its_checksum_is_malformed():
    good = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}})
    bad = good[:-1] + bytes([good[-1] ^ 0xFF])
    [error] = events(StreamTranslator("m", None, False, 0).feed(bad))
    assert error["error"]["code"] == "upstream_malformed_event"


def test_a_stream_split_anywhere_decodes_the_same():
    whole = b"".join([event("messageStart", {"role": "assistant"}),
                      event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ab"}}),
                      event("messageStop", {"stopReason": "end_turn"}),
                      event("metadata", {"usage": {"inputTokens": 1, "outputTokens": 1}})])
    translator = StreamTranslator("m", None, True, 0)
    out = [piece for i in range(0, len(whole), 7) for piece in translator.feed(whole[i:i + 7])]
    found = events(out)
    assert found[0]["choices"][0]["delta"]["content"] == "ab" and found[-2]["usage"]["total_tokens"] == 2
    assert found[-1] == "[DONE]"


@pytest.mark.parametrize(("kind", "status"), sorted(STATUS.items()))
def test_error_bodies_get_our_envelope_with_the_exception_as_code(kind, status):
    translator = ErrorTranslator(kind, status)
    translator.feed(b'{"message": "nope"}')
    error = json.loads(translator.close()[0])["error"]
    assert error["code"] == kind and error["message"] == f"bedrock {kind}: nope"
