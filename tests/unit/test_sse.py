"""The incremental SSE decoder: any split of the bytes gives the same events."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switchyard.actors.sse import Event, SSEDecoder, SSEEventTooLarge, encode_data


def decode_all(stream: bytes, cuts: list[int] = (), **kw) -> tuple[list[Event], Event | None]:
    decoder = SSEDecoder(**kw)
    events: list[Event] = []
    last = 0
    for cut in sorted(set(cuts)):
        events += decoder.feed(stream[last:cut])
        last = cut
    events += decoder.feed(stream[last:])
    return events, decoder.close()


def complete_events(stream: bytes, cuts: list[int] = ()) -> list[Event]:
    """Every terminated event, including one that only a final bare \r ended (close() gives it)."""
    events, tail = decode_all(stream, cuts)
    return events + [tail] if tail is not None and tail.complete else events


# --- examples ------------------------------------------------------------------

def test_openai_stream_decodes_to_data_events():
    stream = (b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
              b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
              b"data: [DONE]\n\n")
    events, tail = decode_all(stream)
    assert [e.data for e in events] == [b'{"choices":[{"delta":{"content":"Hi"}}]}',
                                        b'{"choices":[{"delta":{},"finish_reason":"stop"}]}', b"[DONE]"]
    assert [e.is_done for e in events] == [False, False, True]
    assert b"".join(e.raw for e in events) == stream
    assert events[0].raw == b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
    assert tail is None


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"])
def test_each_line_ending_separates_events(sep):
    stream = b"data: one" + sep + sep + b"data: two" + sep + sep
    events = complete_events(stream)
    assert [e.data for e in events] == [b"one", b"two"]
    assert [e.raw for e in events] == [b"data: one" + sep + sep, b"data: two" + sep + sep]


def test_multi_line_data_joined_with_newline():
    events, _ = decode_all(b"data: line one\ndata:line two\ndata\ndata:  indented\n\n")
    assert events[0].data == b"line one\nline two\n\n indented"


def test_comments_event_names_and_ids():
    stream = b": keep-alive\n\nevent: error\nid: 7\n: note\ndata: {\"x\":1}\n\n"
    events, _ = decode_all(stream)
    ping, err = events
    assert ping.has_data is False and ping.data == b"" and ping.raw == b": keep-alive\n\n"
    assert ping.event is None
    assert err.event == "error" and err.id == "7" and err.data == b'{"x":1}' and err.has_data
    assert b"".join(e.raw for e in events) == stream


def test_empty_data_field_is_data():
    (event,), _ = decode_all(b"data:\n\n")
    assert event.has_data and event.data == b""


def test_blank_lines_between_events_belong_to_the_next_raw():
    stream = b"data: a\n\n\n\ndata: b\n\n"
    events, _ = decode_all(stream)
    assert [e.raw for e in events] == [b"data: a\n\n", b"\n\ndata: b\n\n"]
    assert [e.data for e in events] == [b"a", b"b"]


def test_cr_then_lf_in_the_next_chunk_is_one_line_ending():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\n\r") == []  # the last \r may still be half of \r\n
    (event,) = decoder.feed(b"\ndata: b")
    assert event.raw == b"data: a\r\n\r\n"
    assert decoder.pending_bytes == len(b"data: b")


def test_close_reports_unterminated_event():
    events, tail = decode_all(b'data: {"a":1}\n\ndata: {"b":')
    assert [e.data for e in events] == [b'{"a":1}']
    assert tail is not None and tail.complete is False
    assert tail.data == b'{"b":' and tail.raw == b'data: {"b":'


def test_close_reports_event_missing_only_its_blank_line():
    _, tail = decode_all(b"data: x\n")
    assert tail == Event(data=b"x", raw=b"data: x\n", complete=False)


def test_close_completes_event_ended_by_a_final_cr():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r\r") == []
    tail = decoder.close()
    assert tail is not None and tail.complete and tail.data == b"x" and tail.raw == b"data: x\r\r"


def test_close_after_clean_end_or_stray_blank_lines_is_none():
    assert decode_all(b"data: x\n\n\n")[1] is None
    assert SSEDecoder().close() is None


def test_decoder_is_reusable_after_close():
    decoder = SSEDecoder()
    decoder.feed(b"data: cut")
    decoder.close()
    assert [e.data for e in decoder.feed(b"data: fresh\n\n")] == [b"fresh"]


def test_event_over_the_bound_raises():
    decoder = SSEDecoder(max_event_bytes=64)
    decoder.feed(b"data: " + b"x" * 50)
    with pytest.raises(SSEEventTooLarge, match="larger than 64 bytes"):
        decoder.feed(b"x" * 20)


def test_complete_event_over_the_bound_in_one_chunk_raises():
    with pytest.raises(SSEEventTooLarge):
        SSEDecoder(max_event_bytes=16).feed(b"data: " + b"y" * 32 + b"\n\n")


def test_many_small_events_never_hit_the_bound():
    stream = b"data: 0123456789\n\n" * 1000
    events, _ = decode_all(stream, [7, 100, 5000], max_event_bytes=32)
    assert len(events) == 1000


def test_default_bound_is_one_mebibyte():
    decoder = SSEDecoder()
    assert decoder.max_event_bytes == 1024 * 1024
    big = b"data: " + b"z" * (1024 * 1024 - 100) + b"\n\n"
    assert decoder.feed(big)[0].data == b"z" * (1024 * 1024 - 100)
    with pytest.raises(SSEEventTooLarge):
        decoder.feed(b"data: " + b"z" * (1024 * 1024))


def test_encode_data():
    assert encode_data(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert encode_data(b"[DONE]") == b"data: [DONE]\n\n"
    (event,), _ = decode_all(encode_data(b"two\nlines"))
    assert event.data == b"two\nlines"


# --- properties ------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12)
_name = _text.filter(bool)


@st.composite
def sse_streams(draw):
    """A valid stream (every event terminated) plus the events it must decode to."""
    parts: list[bytes] = []
    expected: list[tuple[bytes, str | None, bool]] = []
    for _ in range(draw(st.integers(0, 6))):
        sep = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
        parts.append(sep * draw(st.integers(0, 2)))  # stray blank lines before the event
        lines: list[bytes] = []
        data: list[bytes] = []
        name = None
        for kind in draw(st.lists(st.sampled_from(["data", "comment", "event"]), min_size=1, max_size=5)):
            value = draw(_text).encode()
            if kind == "data":
                data.append(value)
                lines.append(b"data: " + value)
            elif kind == "comment":
                lines.append(b":" + value)
            else:
                name = draw(_name)
                lines.append(b"event: " + name.encode())
        parts.append(b"".join(line + sep for line in lines) + sep)
        expected.append((b"\n".join(data), name, bool(data)))
    return b"".join(parts), expected


@settings(max_examples=300, deadline=None)
@given(sse_streams(), st.data())
def test_any_split_decodes_to_the_same_events(case, data):
    stream, expected = case
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    whole, whole_tail = decode_all(stream)
    split, split_tail = decode_all(stream, cuts)
    assert split == whole
    assert split_tail == whole_tail
    every = complete_events(stream, cuts)
    assert [(e.data, e.event, e.has_data) for e in every] == expected
    assert all(e.complete for e in every)


@settings(max_examples=300, deadline=None)
@given(sse_streams(), st.data())
def test_raw_bytes_reproduce_the_input(case, data):
    stream, _ = case
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    events, tail = decode_all(stream, cuts)
    # a stream that ends in a bare \r completes its last event only at close
    out = b"".join(e.raw for e in events) + (tail.raw if tail else b"")
    assert out == stream


@settings(max_examples=300, deadline=None)
@given(sse_streams(), st.data())
def test_a_cut_stream_keeps_its_events_and_reports_its_tail(case, data):
    stream, _ = case
    cut_stream = stream[:data.draw(st.integers(0, len(stream)))]
    cuts = data.draw(st.lists(st.integers(0, len(cut_stream)), max_size=6))
    whole = complete_events(stream)
    events, tail = decode_all(cut_stream, cuts)
    assert events == whole[:len(events)]
    out = b"".join(e.raw for e in events) + (tail.raw if tail else b"")
    # only blank lines after the last event may be left out
    assert cut_stream.startswith(out) and cut_stream[len(out):].strip(b"\r\n") == b""
    if tail is not None and not tail.complete:
        assert len(events) < len(whole)


@st.composite
def data_line_streams(draw):
    """What backends send: ``data: <json>\\n\\n`` events, at times a comment or stray blank line between."""
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["data", "data", "data", "comment", "blank", "done"]))
        if kind == "data":
            parts.append(b"data: " + draw(_text).encode() + b"\n\n")
        elif kind == "comment":
            parts.append(b": keep-alive\n\n")
        elif kind == "blank":
            parts.append(b"\n")
        else:
            parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


@settings(max_examples=300, deadline=None)
@given(data_line_streams(), st.data())
def test_chunks_of_one_line_data_events_decode_as_the_line_scan_does(stream, data):
    """A chunk of whole one-line data events is split in one pass; fed a byte at a time the same
    stream goes through the line scan: both give the same events, and their raw bytes the input."""
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=6))
    events, tail = decode_all(stream, cuts)
    scanned, scanned_tail = decode_all(stream, list(range(len(stream))))
    assert events == scanned and tail == scanned_tail
    out = b"".join(e.raw for e in events) + (tail.raw if tail else b"")
    assert stream.startswith(out) and stream[len(out):].strip(b"\n") == b""   # close drops trailing blank lines


def test_a_chunk_of_one_line_data_events_keeps_an_unfinished_last_one():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: 1\n\ndata: 2\n\ndata: 3") == [
        Event(data=b"1", raw=b"data: 1\n\n"), Event(data=b"2", raw=b"data: 2\n\n")]
    assert decoder.pending_bytes == len(b"data: 3")
    assert decoder.feed(b"\n\n") == [Event(data=b"3", raw=b"data: 3\n\n")]


def test_a_chunk_of_one_line_data_events_over_the_bound_raises():
    with pytest.raises(SSEEventTooLarge):
        SSEDecoder(max_event_bytes=16).feed(b"data: 1\n\ndata: " + b"x" * 20 + b"\n\n")
    with pytest.raises(SSEEventTooLarge):   # an unfinished event past the bound
        SSEDecoder(max_event_bytes=16).feed(b"data: 1\n\ndata: " + b"x" * 20)
