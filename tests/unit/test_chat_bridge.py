"""The reverse Responses bridge, request side: each rule of a /v1/responses body written as a chat body."""

from __future__ import annotations

import logging

import pytest

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.protocol.wires.chat_bridge import responses_to_chat


def chat(**body):
    return responses_to_chat({"model": "m", "input": "hi", **body}, "local", "vllm")


def refused(**body) -> UnsupportedRequestParameter:
    with pytest.raises(UnsupportedRequestParameter) as caught:
        chat(**body)
    return caught.value


WEATHER = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}


def test_a_string_input_is_one_user_message():
    assert chat()["messages"] == [{"role": "user", "content": "hi"}]


def test_instructions_become_the_leading_system_message():
    assert chat(instructions="Be brief.")["messages"][0] == {"role": "system", "content": "Be brief."}


def test_message_items_keep_their_role_and_developer_becomes_system():
    body = chat(input=[{"role": "developer", "content": "rules"}, {"type": "message", "role": "user", "content": "q"},
                       {"role": "assistant", "content": [{"type": "output_text", "text": "a"}], "id": "msg_1",
                        "status": "completed"}])
    assert body["messages"] == [{"role": "system", "content": "rules"}, {"role": "user", "content": "q"},
                                {"role": "assistant", "content": "a"}]


def test_input_text_image_and_file_parts_become_chat_parts():
    parts = [{"type": "input_text", "text": "see"},
             {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "low"},
             {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
             {"type": "input_file", "file_data": "data:application/pdf;base64,AA", "filename": "a.pdf"}]
    assert chat(input=[{"role": "user", "content": parts}])["messages"][0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA", "filename": "a.pdf"}}]


def test_an_image_by_file_id_is_refused_by_name():
    err = refused(input=[{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}])
    assert err.param == "input[0].content[0].file_id"


def test_function_calls_join_one_assistant_message_and_outputs_become_tool_messages():
    body = chat(input=[{"role": "user", "content": "weather?"},
                       {"role": "assistant", "content": "Checking."},
                       {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}",
                        "id": "fc_1", "status": "completed"},
                       {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"a\":1}"},
                       {"type": "function_call_output", "call_id": "c1", "output": "18C"},
                       {"type": "function_call_output", "call_id": "c2",
                        "output": [{"type": "input_text", "text": "20C"}]}])
    assert body["messages"][1:] == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"a\":1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "20C"}]}]


def test_reasoning_items_are_left_out_with_a_log_line(caplog):
    with caplog.at_level(logging.INFO, logger="switchyard.route"):
        body = chat(input=[{"type": "reasoning", "id": "rs_1", "summary": []}, {"role": "user", "content": "q"}])
    assert body["messages"] == [{"role": "user", "content": "q"}]
    assert "input[0]" in caplog.text and "local" in caplog.text


def test_other_input_items_are_refused_by_name():
    assert refused(input=[{"type": "item_reference", "id": "x"}]).param == "input[0].type"


def test_function_tools_become_chat_function_tools_strict_by_default():
    assert chat(tools=[WEATHER])["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather", "parameters": {"type": "object"}, "strict": True}}]
    assert chat(tools=[{**WEATHER, "strict": False}])["tools"][0]["function"]["strict"] is False


@pytest.mark.parametrize("kind", ["file_search", "mcp", "code_interpreter", "image_generation"])
def test_hosted_tools_are_refused_by_name(kind):
    err = refused(tools=[WEATHER, {"type": kind}])
    assert err.param == "tools[1].type" and "local" in err.message and "vllm" in err.message


@pytest.mark.parametrize("kind", ["web_search", "web_search_preview"])
def test_a_web_search_tool_merely_offered_is_left_out(kind):
    """Codex CLI offers one on every call: the chat model answers without it."""
    assert chat(tools=[WEATHER, {"type": kind, "external_web_access": False}])["tools"] == \
        chat(tools=[WEATHER])["tools"]
    assert "tools" not in chat(tools=[{"type": kind}])


def test_a_choice_among_no_tools_left_asks_for_nothing_and_one_that_requires_a_call_is_refused():
    only_search = [{"type": "web_search"}]
    body = chat(tools=only_search, tool_choice="auto", parallel_tool_calls=True)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)   # a chat API refuses them alone
    assert refused(tools=only_search, tool_choice="required").param == "tool_choice"


def test_a_web_search_tool_the_tool_choice_names_is_refused():
    assert refused(tools=[{"type": "web_search"}], tool_choice={"type": "web_search"}).param == "tools[0].type"


def test_a_namespace_tools_functions_are_offered_flattened():
    namespace = {"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [WEATHER]}
    [tool] = chat(tools=[namespace])["tools"]
    assert tool["function"]["name"] == "agents__get_weather"


def test_a_namespaces_description_leads_each_of_its_functions():
    namespace = {"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [WEATHER]}
    [tool] = chat(tools=[namespace])["tools"]
    assert tool["function"]["description"] == "Sub-agents.\n\nWeather"


def test_a_tool_choice_naming_a_namespaced_function_names_it_as_offered():
    namespace = {"type": "namespace", "name": "agents", "tools": [WEATHER]}
    named = {"type": "function", "function": {"name": "agents__get_weather"}}
    assert chat(tools=[namespace], tool_choice={"type": "function", "name": "get_weather"})["tool_choice"] == named
    assert chat(tools=[namespace], tool_choice={"type": "function", "name": "get_weather", "namespace": "agents"}
                )["tool_choice"] == named
    allowed = chat(tools=[namespace], tool_choice={"type": "allowed_tools", "mode": "required",
                                                   "tools": [{"type": "function", "name": "get_weather"}]})
    assert allowed["tool_choice"]["allowed_tools"]["tools"] == [named]
    # a plain function of that name is the one meant
    plain = chat(tools=[namespace, WEATHER], tool_choice={"type": "function", "name": "get_weather"})
    assert plain["tool_choice"]["function"]["name"] == "get_weather"


def test_a_flattened_name_that_collides_with_a_functions_is_a_400():
    namespace = {"type": "namespace", "name": "agents", "tools": [WEATHER]}
    with pytest.raises(InvalidRequest) as caught:
        chat(tools=[namespace, {**WEATHER, "name": "agents__get_weather"}])
    assert caught.value.param == "tools" and "'agents__get_weather' twice" in caught.value.message


def test_a_namespaced_function_call_in_the_input_goes_under_its_flattened_name():
    call = {"type": "function_call", "call_id": "c1", "name": "get_weather", "namespace": "agents",
            "arguments": "{}"}
    messages = chat(input=[call, {"type": "function_call_output", "call_id": "c1", "output": "ok"}])["messages"]
    assert messages[0]["tool_calls"][0]["function"]["name"] == "agents__get_weather"


def test_include_of_encrypted_reasoning_and_client_metadata_ask_nothing_a_chat_answer_cannot_give():
    body = chat(include=["reasoning.encrypted_content"], client_metadata={"session_id": "s"})
    assert not {"include", "client_metadata"} & set(body)


def test_an_include_a_chat_answer_cannot_hold_is_refused_by_its_index():
    assert refused(include=["reasoning.encrypted_content", "message.output_text.logprobs"]).param == "include[1]"


def test_an_include_value_that_is_no_string_is_a_400_naming_it():
    with pytest.raises(InvalidRequest) as caught:
        chat(include=[{}])
    assert caught.value.param == "include[0]"


def test_tool_choice_and_parallel_tool_calls_are_carried():
    assert chat(tool_choice="required")["tool_choice"] == "required"
    assert chat(tool_choice={"type": "function", "name": "f"})["tool_choice"] == \
        {"type": "function", "function": {"name": "f"}}
    assert chat(tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"}]}
                )["tool_choice"] == {"type": "allowed_tools", "allowed_tools": {
                    "mode": "auto", "tools": [{"type": "function", "function": {"name": "f"}}]}}
    assert chat(parallel_tool_calls=False)["parallel_tool_calls"] is False
    assert refused(tool_choice={"type": "web_search"}).param == "tool_choice.type"


@pytest.mark.parametrize("kind", [["web_search"], {"type": "function"}, 1])
def test_a_tool_choice_type_that_is_not_a_string_is_refused_by_name(kind):
    assert refused(tool_choice={"type": kind}).param == "tool_choice.type"


def test_text_format_becomes_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert chat(text={"format": {"type": "json_schema", "name": "out", "schema": schema, "strict": True}}
                )["response_format"] == {"type": "json_schema",
                                         "json_schema": {"name": "out", "schema": schema, "strict": True}}
    assert chat(text={"format": {"type": "json_object"}})["response_format"] == {"type": "json_object"}
    assert chat(text={"verbosity": "low"})["verbosity"] == "low"


def test_sampling_limits_and_identity_fields_are_carried():
    body = chat(max_output_tokens=64, temperature=0.2, top_p=0.9, user="u", metadata={"k": "v"},
                reasoning={"effort": "low", "summary": "auto"})
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["user"], body["metadata"],
            body["reasoning_effort"]) == (64, 0.2, 0.9, "u", {"k": "v"}, "low")


def test_a_stream_asks_the_chat_backend_for_its_usage():
    assert chat(stream=True)["stream_options"] == {"include_usage": True}
    assert "stream_options" not in chat(stream=False)


def test_store_is_not_sent():
    assert "store" not in chat(store=True)


@pytest.mark.parametrize(("field", "value"), [("background", True), ("previous_response_id", "resp_1"),
                                              ("conversation", "conv_1"),
                                              ("truncation", "auto"), ("prompt", {"id": "p"})])
def test_what_a_chat_backend_cannot_hold_is_refused_by_name(field, value):
    assert refused(**{field: value}).param == field


def test_values_that_ask_for_nothing_pass():
    body = chat(background=False, include=[], truncation="disabled")
    assert not {"background", "include", "truncation"} & set(body)


def test_an_unknown_field_is_refused_by_name():
    assert refused(frobnicate=1).param == "frobnicate"


def test_a_bad_max_output_tokens_is_a_400_naming_it():
    with pytest.raises(InvalidRequest) as caught:
        chat(max_output_tokens=0)
    assert caught.value.param == "max_output_tokens"


def test_fields_the_backends_request_extensions_write_are_sent_as_they_are():
    body = responses_to_chat({"model": "m", "input": "hi", "top_k": 5, "chat_template_kwargs": {"a": 1}},
                             "local", "vllm", own=frozenset({"top_k", "chat_template_kwargs"}))
    assert (body["top_k"], body["chat_template_kwargs"]) == (5, {"a": 1})


def test_a_file_by_url_is_refused_by_name():
    err = refused(input=[{"role": "user", "content": [{"type": "input_file", "file_url": "https://x/a.pdf"}]}])
    assert err.param == "input[0].content[0].file_url" and "file_data" in err.message
