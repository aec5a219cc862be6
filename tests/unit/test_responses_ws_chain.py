"""A Responses websocket's own responses (protocol/doors/responses_ws_chain.py): what a turn chaining on one
sends, and the bounds."""

import json

import pytest

from switchyard.actors.errors import InvalidRequest
from switchyard.protocol.doors.responses_ws_chain import SocketResponses

USER = {"type": "message", "role": "user", "content": "remember: cobalt"}
SAID = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "OK", "annotations": []}]}
CALL = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{}",
        "status": "completed"}


def kept_first(responses: SocketResponses, output: list, payload: dict | None = None) -> None:
    payload = payload or {"model": "demo", "input": "remember: cobalt", "store": False}
    responses.keep("resp_1", responses.turn(payload), output)


def test_a_turn_naming_a_kept_response_carries_its_conversation_and_no_previous_response_id():
    responses = SocketResponses()
    kept_first(responses, [SAID])
    turn = responses.turn({"model": "demo", "input": "what was it?", "previous_response_id": "resp_1",
                           "instructions": "be brief", "store": False})
    assert turn.expanded and turn.named == "resp_1" and turn.base is None
    assert "previous_response_id" not in turn.payload and turn.payload["instructions"] == "be brief"
    said = {key: value for key, value in SAID.items() if key != "id"}   # an id names nothing a backend kept
    assert turn.payload["input"] == [USER, said, {"type": "message", "role": "user", "content": "what was it?"}]


def test_a_turn_naming_no_kept_response_is_sent_as_it_is():
    responses = SocketResponses()
    payload = {"model": "demo", "input": "hi", "previous_response_id": "resp_elsewhere"}
    turn = responses.turn(payload)
    assert not turn.expanded and turn.payload is payload and turn.base == "resp_elsewhere"


def test_a_conversation_that_continued_a_stored_response_keeps_chaining_on_it():
    responses = SocketResponses()
    responses.keep("resp_2", responses.turn({"model": "demo", "input": "more", "previous_response_id": "resp_held",
                                             "store": False}), [SAID])
    turn = responses.turn({"model": "demo", "input": "and?", "previous_response_id": "resp_2"})
    assert turn.payload["previous_response_id"] == "resp_held"   # the backend holding it continues it
    assert [i.get("content") for i in turn.payload["input"]][0] == "more"


def test_reasoning_goes_back_only_with_its_encrypted_content():
    responses = SocketResponses()
    opaque = {"id": "rs_1", "type": "reasoning", "summary": []}
    sealed = {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}
    kept_first(responses, [opaque, sealed, SAID])
    turn = responses.turn({"model": "demo", "input": "next", "previous_response_id": "resp_1"})
    assert [i.get("type") for i in turn.payload["input"]] == ["message", "reasoning", "message", "message"]
    assert [i.get("encrypted_content") for i in turn.payload["input"]][1] == "gAAA"
    assert all("id" not in i for i in turn.payload["input"])   # none names an item a backend kept


def test_a_function_call_output_must_answer_a_call_the_conversation_made():
    responses = SocketResponses()
    kept_first(responses, [CALL])
    answered = responses.turn({"model": "demo", "previous_response_id": "resp_1",
                               "input": [{"type": "function_call_output", "call_id": "call_1", "output": "42"}]})
    assert answered.expanded
    with pytest.raises(InvalidRequest) as refused:
        responses.turn({"model": "demo", "previous_response_id": "resp_1",
                        "input": [{"type": "function_call_output", "call_id": "call_none", "output": "?"}]})
    assert refused.value.param == "input[0].call_id"
    assert refused.value.message == "No tool call found for function call output with call_id call_none."


def test_the_most_recent_responses_are_kept_and_the_oldest_go_first():
    responses = SocketResponses(kept=2)
    for n in range(3):
        responses.keep(f"resp_{n}", responses.turn({"model": "demo", "input": str(n)}), [SAID])
    assert "resp_0" not in responses and "resp_1" in responses and "resp_2" in responses


def test_the_conversations_kept_are_bounded_in_bytes_each_counted_whole():
    item_bytes = len(json.dumps([USER, SAID]))
    responses = SocketResponses(kept_bytes=2 * item_bytes + 1)
    kept_first(responses, [SAID])
    responses.keep("resp_2", responses.turn({"model": "demo", "input": "remember: cobalt"}), [SAID])
    assert len(responses) == 2
    responses.keep("resp_3", responses.turn({"model": "demo", "input": "x", "previous_response_id": "resp_2"}),
                   [SAID])   # a longer conversation: the oldest go until it fits
    assert "resp_1" not in responses and "resp_3" in responses


def test_a_conversation_larger_than_the_bound_is_not_kept():
    responses = SocketResponses(kept_bytes=10)
    kept_first(responses, [SAID])
    assert len(responses) == 0


def test_forgetting_frees_its_bytes():
    responses = SocketResponses(kept_bytes=len(json.dumps([USER, SAID])) + 1)
    kept_first(responses, [SAID])
    responses.forget("resp_1")
    kept_first(responses, [SAID])
    assert "resp_1" in responses
