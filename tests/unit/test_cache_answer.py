"""The response cache's stored form (actors/cache/answer.py): what folds into it, and how it goes out again."""

from __future__ import annotations

import json

import pytest

from switchyard.actors.cache.answer import Unclean, clean_completion, fold_stream, stream_events


def sse(*chunks: dict | str) -> bytes:
    return b"".join(b"data: " + (c.encode() if isinstance(c, str) else json.dumps(c).encode()) + b"\n\n"
                    for c in chunks)


def chunk(delta: dict, finish: str | None = None, index: int = 0) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 7, "model": "demo",
            "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}


def test_a_stream_folds_into_one_completion_with_every_choice_and_tool_call():
    data = sse(chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}),
               chunk({"content": "Other"}, index=1),
               chunk({"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                                      "function": {"name": "get", "arguments": "{\"a\""}}]}),
               chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}),
               chunk({}, "tool_calls"), chunk({}, "stop", index=1), "[DONE]")
    folded, _ = fold_stream(data, usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3, "cost": 0.1})
    first, second = folded["choices"]
    assert first["message"]["content"] == "Hello" and first["finish_reason"] == "tool_calls"
    assert first["message"]["tool_calls"] == [{"id": "t1", "type": "function",
                                               "function": {"name": "get", "arguments": "{\"a\": 1}"}}]
    assert second["message"]["content"] == "Other"
    assert folded["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}   # no cost
    assert (folded["id"], folded["object"], folded["created"]) == ("c1", "chat.completion", 7)


@pytest.mark.parametrize("data, reason", [
    (sse(chunk({"content": "cut"})), "truncated"),
    (sse(chunk({"content": "no end"}), "[DONE]"), "no_finish_reason"),
    (sse(chunk({"content": "x"}), {"error": {"message": "boom"}}), "error"),
    (sse(chunk({"content": "x"}), {"route_change": {"reason": "timeout"}}, chunk({}, "stop"), "[DONE]"),
     "route_changed"),
    (b"data: {not json\n\n", "malformed"),
])
def test_a_stream_that_is_not_whole_and_clean_has_no_stored_form(data, reason):
    with pytest.raises(Unclean, match=reason):
        fold_stream(data)


def test_a_buffered_answer_without_a_finish_reason_is_not_stored():
    with pytest.raises(Unclean, match="no_finish_reason"):
        clean_completion(json.dumps({"choices": [{"index": 0, "message": {"content": "x"}}]}).encode())


def test_signed_reasoning_blocks_survive_the_fold_and_the_replay():
    data = sse(chunk({"reasoning_content": "think"}), chunk({"reasoning_signature": "sig"}),
               chunk({"reasoning_redacted": "opaque"}), chunk({"content": "done"}), chunk({}, "stop"), "[DONE]")
    folded, events = fold_stream(data)
    assert folded["choices"][0]["message"]["reasoning_blocks"] == [
        {"type": "thinking", "thinking": "think", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"}]
    rechunked, _ = fold_stream(b"".join(stream_events(folded, include_usage=False)))
    assert rechunked["choices"] == folded["choices"]
    replayed = stream_events(folded, include_usage=False, events=events)
    assert replayed == [b"data: " + e.encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def test_a_replayed_stream_ends_with_usage_when_asked_and_done():
    completion = {"id": "c1", "created": 1, "model": "demo", "usage": {"total_tokens": 3},
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    events = stream_events(completion, include_usage=True)
    assert events[-1] == b"data: [DONE]\n\n"
    assert json.loads(events[-2][6:]) ["usage"] == {"total_tokens": 3}
    assert b"usage" not in b"".join(stream_events(completion, include_usage=False))
