"""StreamAccumulator and Aligner: the pure bookkeeping behind mid-stream failover."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from switchyard.actors.routing.stream_state import (
    DEFAULT_CAP_BYTES,
    Aligner,
    StreamAccumulator,
    classify,
)


def chunk(delta: dict | None = None, finish: str | None = None, index: int = 0, **extra) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
            "model": "demo", "choices": [{"index": index, "delta": delta or {}, "finish_reason": finish}],
            **extra}


# --- classify --------------------------------------------------------------------

def test_classify():
    assert classify(chunk({"content": "x"})) == "chunk"
    assert classify({"id": "x", "choices": [], "usage": {"total_tokens": 3}}) == "chunk"
    assert classify({"error": {"message": "boom", "type": "server_error"}}) == "error"
    assert classify({"error": None, "choices": []}) == "chunk"
    assert classify([1, 2]) == "other"
    assert classify("[DONE]") == "other"


# --- StreamAccumulator -------------------------------------------------------------

def test_accumulates_content_and_metadata():
    acc = StreamAccumulator()
    acc.feed(chunk({"role": "assistant", "content": ""}))
    acc.feed(chunk({"content": "Hello"}))
    acc.feed(chunk({"content": " world"}, system_fingerprint="fp1"))
    assert not acc.complete
    acc.feed(chunk({}, finish="stop"))
    acc.feed({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
              "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    assert acc.content == "Hello world"
    assert acc.role == "assistant"
    assert acc.finish_reason == "stop" and acc.complete
    assert acc.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert (acc.id, acc.model, acc.created, acc.system_fingerprint) == ("chatcmpl-1", "demo", 1700000000, "fp1")
    assert acc.deltas == 2  # the empty role chunk does not count
    assert acc.chunks == 5
    assert acc.size_bytes == len("Hello world")
    assert not acc.capped


def test_first_identity_wins_and_last_usage_wins():
    acc = StreamAccumulator()
    acc.feed(chunk({"content": "a"}, usage={"total_tokens": 1}))
    acc.feed({**chunk({"content": "b"}), "id": "other", "model": "other", "usage": {"total_tokens": 2}})
    assert (acc.id, acc.model) == ("chatcmpl-1", "demo")
    assert acc.usage == {"total_tokens": 2}


def test_reasoning_under_either_name_counted_once():
    acc = StreamAccumulator()
    acc.feed(chunk({"reasoning_content": "think "}))
    acc.feed(chunk({"reasoning": "more"}))
    acc.feed(chunk({"reasoning_content": "!", "reasoning": "!"}))  # some servers send both
    acc.feed(chunk({"content": "answer", "reasoning_content": None}))
    assert acc.reasoning == "think more!"
    assert acc.content == "answer"
    assert acc.deltas == 4


def test_tool_calls_merged_by_index():
    acc = StreamAccumulator()
    acc.feed(chunk({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}))
    acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}))
    acc.feed(chunk({"tool_calls": [
        {"index": 1, "id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}))
    acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}))
    acc.feed(chunk({}, finish="tool_calls"))
    assert acc.tool_calls == [
        {"index": 0, "id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"index": 1, "id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert acc.content == ""
    assert acc.deltas == 3  # argument pieces only; the empty first one does not count
    assert acc.finish_reason == "tool_calls"


def test_tool_call_name_repeated_by_the_server_is_not_doubled():
    acc = StreamAccumulator()
    acc.feed(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{"}}]}))
    acc.feed(chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "}"}}]}))
    assert acc.tool_calls[0]["function"] == {"name": "f", "arguments": "{}"}


def test_tool_calls_without_index():
    acc = StreamAccumulator()
    acc.feed(chunk({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}))
    acc.feed(chunk({"tool_calls": [{"function": {"arguments": "}"}}]}))
    acc.feed(chunk({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}))
    assert [(t["id"], t["function"]["arguments"]) for t in acc.tool_calls] == [("a", "{}"), ("b", "{}")]
    assert acc.tool_calls[0]["type"] == "function"


def test_other_choices_are_flagged_not_mixed_in():
    acc = StreamAccumulator()
    acc.feed(chunk({"content": "zero"}))
    acc.feed(chunk({"content": "one"}, index=1))
    acc.feed(chunk({}, finish="stop", index=1))
    assert acc.content == "zero"
    assert acc.other_choices
    assert not acc.complete


def test_in_band_error_recorded():
    acc = StreamAccumulator()
    acc.feed(chunk({"content": "partial"}))
    assert acc.feed({"error": {"message": "boom", "code": "simulated_error"}}) == "error"
    assert acc.error == {"message": "boom", "code": "simulated_error"}
    assert acc.content == "partial"
    assert not acc.complete


def test_garbage_is_ignored():
    acc = StreamAccumulator()
    assert acc.feed([1]) == "other"
    acc.feed({"choices": None})
    acc.feed({"choices": ["x", {"delta": "nope"}]})
    acc.feed({"choices": [{"delta": {"content": 5, "tool_calls": ["bad", {"index": 0, "function": "x"}]}}]})
    assert acc.content == "" and acc.deltas == 0


def test_cap_stops_storing_but_keeps_counting():
    acc = StreamAccumulator(cap_bytes=10)
    acc.feed(chunk({"content": "12345"}))
    acc.feed(chunk({"content": "67890"}))
    assert not acc.capped and acc.content == "1234567890"
    acc.feed(chunk({"content": "x"}))
    assert acc.capped
    acc.feed(chunk({"reasoning": "é"}))  # 2 bytes in UTF-8
    assert acc.content == "1234567890"  # nothing stored past the cap
    assert acc.reasoning == ""
    assert acc.size_bytes == 13
    assert acc.deltas == 4


def test_default_cap_is_100_kib():
    acc = StreamAccumulator()
    assert acc.cap_bytes == DEFAULT_CAP_BYTES == 100 * 1024
    for _ in range(100):
        acc.feed(chunk({"content": "a" * 1024}))
    assert not acc.capped
    acc.feed(chunk({"content": "a"}))
    assert acc.capped and len(acc.content) == 100 * 1024


# --- Aligner -------------------------------------------------------------------------

def test_aligner_repeats_then_continues():
    al = Aligner("Hello world")
    assert al.feed("Hello") == ("", "repeating")
    assert al.feed(" wor") == ("", "repeating")
    assert al.remaining == 2
    assert al.feed("ld, and") == (", and", "continuing")
    assert al.feed(" more") == (" more", "continuing")
    assert al.caught_up


def test_aligner_exact_end_of_prefix_then_continues():
    al = Aligner("abc")
    assert al.feed("abc") == ("", "repeating")
    assert al.caught_up and al.remaining == 0
    assert al.feed("d") == ("d", "continuing")


def test_aligner_with_nothing_sent_continues_at_once():
    al = Aligner("")
    assert al.feed("first") == ("first", "continuing")


def test_aligner_diverges_and_stays_diverged():
    al = Aligner("Hello world")
    assert al.feed("Hello") == ("", "repeating")
    assert al.feed(" there") == ("", "diverged")
    assert al.feed(" world and more") == ("", "diverged")
    assert al.state == "diverged"


def test_aligner_does_not_forgive_whitespace():
    assert Aligner("Hello world").feed("Hello  world") == ("", "diverged")
    assert Aligner("Hello world").feed("Hello\nworld") == ("", "diverged")
    assert Aligner("a b").feed(" a b") == ("", "diverged")


def test_aligner_divergence_inside_a_crossing_piece():
    al = Aligner("abc")
    assert al.feed("abX and more") == ("", "diverged")


def test_aligner_empty_pieces_change_nothing():
    al = Aligner("ab")
    assert al.feed("") == ("", "repeating")
    assert al.feed("ab") == ("", "repeating")
    assert al.feed("") == ("", "continuing")


def test_aligner_new_stream_shorter_than_sent_stays_repeating():
    al = Aligner("Hello world")
    al.feed("Hello")
    assert al.state == "repeating" and al.remaining == 6


_pieces_text = st.text(alphabet="ab \n", max_size=30)


def _split(text: str, cuts: list[int]) -> list[str]:
    points = [0, *sorted(set(c % (len(text) + 1) for c in cuts)), len(text)]
    return [text[a:b] for a, b in zip(points, points[1:], strict=False)]


@given(_pieces_text, _pieces_text, st.lists(st.integers(0, 100), max_size=8))
def test_aligner_emits_exactly_the_text_past_the_sent_prefix(sent, extra, cuts):
    al = Aligner(sent)
    emitted = [al.feed(p) for p in _split(sent + extra, cuts)]
    assert "".join(e for e, _ in emitted) == extra
    assert all(s != "diverged" for _, s in emitted)
    assert al.caught_up


@given(_pieces_text, _pieces_text, st.lists(st.integers(0, 100), max_size=8))
def test_aligner_any_split_gives_the_same_verdict(sent, new, cuts):
    whole = Aligner(sent)
    whole_emit, whole_state = whole.feed(new)
    al = Aligner(sent)
    results = [al.feed(p) for p in _split(new, cuts)]
    assert "".join(e for e, _ in results) == whole_emit
    assert al.state == whole.state
    if new.startswith(sent) or sent.startswith(new):
        assert al.state != "diverged"
    else:
        assert al.state == "diverged" and whole_emit == ""
    assert whole_state in ("repeating", "continuing", "diverged")
