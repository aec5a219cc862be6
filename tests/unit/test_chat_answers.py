"""The reverse Responses bridge, answer side: chat answers as Response objects and Responses events,
checked against the official SDK's own types and stream accumulator."""

from __future__ import annotations

import json

from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response
from openai.types.responses.response_stream_event import ResponseStreamEvent
from pydantic import TypeAdapter

from switchyard.protocol.wires.chat_answers import chat_to_response
from switchyard.protocol.wires.chat_events import ChatToEvents
from tests.published_schemas import event_problems, problems

REQUEST = {"model": "m", "input": "hi", "instructions": "Be brief.", "temperature": 0.5}
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
         "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 2}}
EVENTS = TypeAdapter(ResponseStreamEvent)


def completion(message, finish="stop", usage=USAGE):
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": usage}


def parsed(answer) -> Response:
    return Response.model_validate(chat_to_response(answer, REQUEST))


def test_content_is_one_assistant_message_item_and_the_request_is_echoed():
    response = parsed(completion({"content": "Hello."}))
    assert response.status == "completed" and response.output_text == "Hello."
    assert (response.instructions, response.temperature, response.model) == ("Be brief.", 0.5, "m")
    assert response.id.startswith("resp_") and response.output[0].id.startswith("msg_")


def test_usage_is_carried_in_the_responses_names():
    usage = parsed(completion({"content": "x"})).usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (10, 5, 15)
    assert usage.input_tokens_details.cached_tokens == 4 and usage.output_tokens_details.reasoning_tokens == 2


def test_tool_calls_are_function_call_items():
    response = parsed(completion({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}, "tool_calls"))
    [item] = response.output
    assert (item.type, item.call_id, item.name, item.arguments) == ("function_call", "call_1", "f", "{\"a\":1}")
    assert response.status == "completed"


def test_reasoning_is_a_reasoning_item_before_the_message():
    response = parsed(completion({"content": "42", "reasoning_content": "think"}))
    assert [i.type for i in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].text == "think"


def test_length_is_incomplete_for_max_output_tokens():
    response = parsed(completion({"content": "cut"}, "length"))
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"


def test_content_filter_is_incomplete_for_content_filter_and_a_refusal_is_a_refusal_part():
    response = parsed(completion({"content": ""}, "content_filter"))
    assert response.status == "incomplete" and response.incomplete_details.reason == "content_filter"
    refused = parsed(completion({"content": None, "refusal": "No."}, "content_filter"))
    assert refused.status == "completed" and refused.output[0].content[0].refusal == "No."


def test_an_error_envelope_passes_and_an_answer_without_a_message_becomes_one():
    error = {"error": {"message": "bad", "type": "invalid_request_error", "param": None, "code": None}}
    assert chat_to_response(error, REQUEST) == error
    assert chat_to_response({"choices": []}, REQUEST)["error"]["code"] == "upstream_protocol_error"


# --- the stream ---------------------------------------------------------------------------

def chunk(delta=None, finish=None, usage=None):
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    out = {"id": "c", "object": "chat.completion.chunk", "created": 1700000000, "model": "m", "choices": choices}
    if usage is not None:
        out["usage"] = usage
    return out


def run(*chunks, done=True):
    translator = ChatToEvents(REQUEST)
    raw = b"".join(translator.feed(c) for c in chunks) + (translator.end() if done else b"")
    events = []
    for block in raw.decode().split("\n\n"):
        if block:
            name, data = block.split("\n")
            obj = json.loads(data.removeprefix("data: "))
            assert name == f"event: {obj['type']}"
            events.append(EVENTS.validate_python(obj))
    return events


def accumulated(events) -> Response:
    """What the SDK's ``responses.stream`` makes of the events (it checks their order and identities)."""
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(event)
    return state._completed_response


def test_a_text_stream_is_the_full_event_sequence_numbered_from_zero():
    events = run(chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}), chunk({}, "stop"),
                 chunk(usage=USAGE))
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = accumulated(events)
    assert final.output_text == "Hello" and final.usage.input_tokens == 10 and final.status == "completed"


def test_streamed_tool_calls_are_function_call_items_with_argument_deltas():
    events = run(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                        "function": {"name": "f", "arguments": ""}}]}),
                 chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\""}}]}),
                 chunk({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}), chunk({}, "tool_calls"))
    kinds = [e.type for e in events]
    assert kinds.count("response.function_call_arguments.delta") == 2
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert done.arguments == "{\"a\":1}"
    [item] = accumulated(events).output
    assert (item.call_id, item.name, item.arguments) == ("call_1", "f", "{\"a\":1}")


def test_streamed_reasoning_is_a_reasoning_text_item_closed_before_the_answer():
    events = run(chunk({"reasoning_content": "hmm"}), chunk({"content": "42"}), chunk({}, "stop"))
    kinds = [e.type for e in events]
    assert kinds.index("response.reasoning_text.done") < kinds.index("response.output_text.delta")
    final = accumulated(events)
    assert [i.type for i in final.output] == ["reasoning", "message"] and final.output_text == "42"


def test_a_streamed_length_finish_ends_with_response_incomplete():
    events = run(chunk({"content": "cut"}), chunk({}, "length"))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"


def test_an_in_band_chat_error_is_an_error_event():
    events = run(chunk({"content": "a"}), {"error": {"message": "boom", "code": "x"}}, done=False)
    assert events[-1].type == "error" and events[-1].message == "boom"


def test_a_stream_without_done_has_no_terminal_event():
    events = run(chunk({"content": "a"}), done=False)
    assert events[-1].type == "response.output_text.delta"


def test_a_done_ended_by_a_lone_cr_at_the_very_end_still_completes_the_response():
    """The bridge reads the backend's SSE like the chat relay does: a last event its lone CR ends is whole."""
    from switchyard.protocol.wires.responses_on_chat import _Events

    events = _Events(ChatToEvents(REQUEST))
    raw = b"".join(events.feed(b"data: " + json.dumps(chunk({"content": "a"}, "stop")).encode()
                               + b"\n\ndata: [DONE]\n\r"))
    assert b"response.completed" not in raw
    assert b"event: response.completed" in b"".join(events.close())


NAMESPACED = {**REQUEST, "tools": [{"type": "namespace", "name": "agents", "description": "Sub-agents.", "tools": [
    {"type": "function", "name": "spawn", "parameters": {"type": "object"}}]}]}
AGENT_CALL = {"id": "call_1", "type": "function", "function": {"name": "agents__spawn", "arguments": "{}"}}


def test_a_call_of_a_namespaces_flattened_function_comes_back_in_its_namespace():
    output = chat_to_response(completion({"content": None, "tool_calls": [AGENT_CALL]}, "tool_calls"),
                              NAMESPACED)["output"]
    assert [(i["type"], i["name"], i.get("namespace")) for i in output] == [("function_call", "spawn", "agents")]


def test_a_streamed_call_of_a_namespaces_flattened_function_comes_back_in_its_namespace():
    translator = ChatToEvents(NAMESPACED)
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **AGENT_CALL}]}, "finish_reason": None}]}
    raw = (translator.feed(chunk) + translator.end()).decode()
    items = [json.loads(b.split("data: ", 1)[1])["item"] for b in raw.split("\n\n") if '"response.output_item.' in b]
    assert {(i["name"], i.get("namespace")) for i in items} == {("spawn", "agents")}


TOOLED = {**REQUEST, "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}


def test_a_bridged_response_has_every_field_the_published_schemas_require():
    buffered = chat_to_response(completion({"content": "Hello."}), TOOLED)
    translator = ChatToEvents(TOOLED)
    raw = b"".join(translator.feed(c) for c in (chunk({"role": "assistant", "content": "Hel"}), chunk({}, "stop"),
                                                   chunk(usage=USAGE))) + translator.end()
    streamed = [json.loads(block.split("data: ", 1)[1]) for block in raw.decode().split("\n\n") if block]
    for spec, name in (("openai", "Response"), ("openresponses", "ResponseResource")):
        assert problems(spec, name, buffered) == []
        assert problems(spec, name, streamed[-1]["response"]) == []
    assert [p for event in streamed for p in event_problems("openresponses", event)] == []
    assert (buffered["store"], buffered["completed_at"], buffered["tools"][0]["strict"]) == (False, None, True)
