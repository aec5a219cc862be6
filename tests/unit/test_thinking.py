"""Thinking patterns: the pure splitter and classifier, and the chunk-level rewriting."""

import itertools
import json

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from switchyard.actors.routing.thinking import Classifier, Splitter, active, buffered
from switchyard.actors.thinking import ThinkingStream
from switchyard.config.load import load_text
from switchyard.config.metadata import Thinking

MARKER = "</think>"


def run_splitter(pieces, marker=MARKER):
    s = Splitter(marker)
    pairs = [s.feed(p) for p in pieces]
    return pairs, s.finish()


def joined(pairs):
    return "".join(r for r, _ in pairs), "".join(c for _, c in pairs)


# --- Splitter -----------------------------------------------------------------------

def test_before_the_marker_is_reasoning_after_it_content_and_the_marker_is_neither():
    pairs, tail = run_splitter(["Let me see.", " 6*7=42", "</think>", "The answer", " is 42."])
    assert pairs == [("Let me see.", ""), (" 6*7=42", ""), ("", ""), ("", "The answer"), ("", " is 42.")]
    assert tail == ("", "")


def test_only_a_possible_marker_prefix_is_held_back():
    s = Splitter()
    assert s.feed("a<b") == ("a<b", "")          # '<b' cannot start the marker
    assert s.feed("x</th") == ("x", "")           # '</th' might
    assert s.feed("e") == ("</the", "")           # it was not: released at once
    assert s.feed("</") == ("", "")
    assert s.finish() == ("</", "")               # the stream ended: it was reasoning


def test_after_the_marker_nothing_is_held_and_a_second_marker_is_text():
    pairs, _ = run_splitter(["r</think>c</", "think>d"])
    assert pairs == [("r", "c</"), ("", "think>d")]


TEXT = st.text(alphabet="ab<>/thinkx ", max_size=30)


@settings(max_examples=300)
@given(reasoning=TEXT | TEXT.map(lambda t: t + "</th"), content=TEXT,
       cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8))
def test_the_marker_split_at_any_position_gives_the_same_text(reasoning, content, cuts):
    assume(MARKER not in reasoning)   # "</think>" has no border, so nothing else can match early
    text = reasoning + MARKER + content
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(points) if b > a]
    pairs, tail = run_splitter(pieces)
    assert len(pairs) == len(pieces)
    assert joined(pairs + [tail]) == (reasoning, content)


@given(st.integers(min_value=0, max_value=len("abc</think>def")))
def test_every_single_cut_position(at):
    text = "abc</think>def"
    pairs, tail = run_splitter([text[:at], text[at:]])
    assert joined(pairs + [tail]) == ("abc", "def")


# --- Classifier (buffered) -----------------------------------------------------------

def test_buffered_holds_until_the_marker_then_releases_reasoning_and_content():
    c = Classifier(MARKER, 1000)
    assert c.feed("thinking") == []
    assert c.feed(" hard</th") == []
    assert c.feed("ink>answer") == [("thinking", ""), (" hard", ""), ("", "answer")]
    assert c.state == "reasoning"
    assert c.feed(" more") == [("", " more")]
    assert c.finish() == []


def test_buffered_over_max_size_without_marker_is_content():
    c = Classifier(MARKER, 10)
    assert c.feed("Sure, ") == []
    assert c.feed("42") == []                   # 8 bytes: still under
    assert c.feed(" it is") == [("", "Sure, "), ("", "42"), ("", " it is")]
    assert c.state == "content"
    assert c.feed("</think>") == [("", "</think>")]   # decided: later text passes unchanged


def test_buffered_size_counts_utf8_bytes():
    c = Classifier(MARKER, 4)
    assert c.feed("éé") == []                   # 4 bytes
    assert c.feed("é") != []                    # 6 bytes: over


def test_buffered_timeout_and_end_decide_content():
    c = Classifier(MARKER, 1000)
    c.feed("Hello")
    assert c.timeout() == [("", "Hello")]
    assert c.timeout() == []
    c = Classifier(MARKER, 1000)
    c.feed("Hi")
    c.feed(" there")
    assert c.finish() == [("", "Hi"), ("", " there")]


def test_buffered_marker_wins_over_size_in_the_same_piece():
    c = Classifier(MARKER, 5)
    assert c.feed("abcdef</think>x") == [("abcdef", "x")]


def test_which_metadata_rewrites():
    assert active(Thinking(pattern="unterminated_start", assume_reasoning_first=True))
    assert not active(Thinking(pattern="unterminated_start"))
    assert not active(Thinking(pattern="something_else", assume_reasoning_first=True))
    assert not active(None)
    assert buffered(Thinking(pattern="unterminated_start", assume_reasoning_first=True, buffered=True))
    assert not buffered(Thinking(pattern="unterminated_start", buffered=True))


def test_an_unknown_pattern_is_a_warning_and_kept(tmp_path):
    loaded = load_text("backends:\n  - name: a\n    type: simulated\n    models: [m]\n    model_configs:\n"
                       "      - {id: m, metadata: {thinking: {pattern: fancy}}}\n", env={}, base_dir=tmp_path)
    assert loaded.snapshot.backend("a").model_metadata["m"].thinking.pattern == "fancy"
    assert any("unknown pattern 'fancy'" in w for w in loaded.warnings)


# --- chunk-level rewriting ------------------------------------------------------------

def chunk(content=None, finish=None, role=False):
    delta = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return obj, b"data: " + json.dumps(obj).encode() + b"\n\n"


def deltas(out):
    return [json.loads(raw[len(b"data: "):])["choices"][0]["delta"] for raw, _ in out]


def test_stream_rewrites_changed_chunks_and_passes_the_rest_raw():
    ts = ThinkingStream(Thinking(pattern="unterminated_start", assume_reasoning_first=True))
    first = ts.feed(*chunk("Hmm", role=True))
    assert deltas(first) == [{"role": "assistant", "reasoning_content": "Hmm"}]
    assert ts.feed(*chunk("</thi")) == []                           # all held back: dropped
    assert deltas(ts.feed(*chunk("nk>Yes"))) == [{"content": "Yes"}]
    obj, raw = chunk(" indeed")
    assert ts.feed(obj, raw) == [(raw, obj)]                        # unchanged: the backend's bytes
    obj, raw = chunk(finish="stop")
    assert ts.feed(obj, raw) == [(raw, obj)]


def test_stream_passes_a_chunk_whose_choices_are_no_list():
    ts = ThinkingStream(Thinking(pattern="unterminated_start", assume_reasoning_first=True))
    obj, raw = {"choices": 5}, b'data: {"choices": 5}\n\n'
    assert ts.feed(obj, raw) == [(raw, obj)]                        # was a TypeError in the relay


def test_stream_tail_goes_into_the_finish_chunk():
    ts = ThinkingStream(Thinking(pattern="unterminated_start", assume_reasoning_first=True))
    ts.feed(*chunk("abc</"))
    out = ts.feed(*chunk(finish="length"))
    assert deltas(out) == [{"reasoning_content": "</"}]
    assert json.loads(out[0][0][6:])["choices"][0]["finish_reason"] == "length"


def test_buffered_stream_holds_chunks_in_order_and_close_releases_them():
    ts = ThinkingStream(Thinking(pattern="unterminated_start", assume_reasoning_first=True, buffered=True,
                                 reasoning_timeout=5.0))
    obj, raw = chunk(role=True)
    assert ts.feed(obj, raw) == [(raw, obj)]                        # before the first text: passes
    assert not ts.wants_timer
    held = [chunk("Direct"), chunk(" answer")]
    assert ts.feed(*held[0]) == [] and ts.wants_timer
    ts.timer_started = True
    assert ts.feed(*held[1]) == []
    out = ts.close()
    assert [raw for raw, _ in out] == [raw for _, raw in held]      # content after all: unchanged bytes


def test_buffered_stream_decided_by_timeout():
    ts = ThinkingStream(Thinking(pattern="unterminated_start", assume_reasoning_first=True, buffered=True))
    assert ts.reasoning_timeout == 10.0
    ts.feed(*chunk("Hi"))
    assert deltas(ts.timeout()) == [{"content": "Hi"}]
    assert deltas(ts.feed(*chunk("</think>x"))) == [{"content": "</think>x"}]


def test_a_resumed_stream_continues_in_content():
    first = ThinkingStream(Thinking(pattern="unterminated_start", assume_reasoning_first=True))
    assert not first.in_content
    first.feed(*chunk("r</think>c"))
    assert first.in_content
    again = ThinkingStream(Thinking(pattern="unterminated_start", assume_reasoning_first=True, buffered=True))
    again.continue_in_content()
    obj, raw = chunk(" more")
    assert again.feed(obj, raw) == [(raw, obj)] and not again.wants_timer


@settings(max_examples=200)
@given(reasoning=TEXT, content=TEXT, cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=8))
def test_buffered_marker_split_anywhere_gives_the_same_text(reasoning, content, cuts):
    assume(MARKER not in reasoning)
    text = reasoning + MARKER + content
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(points) if b > a]
    c = Classifier(MARKER, 10_000)
    pairs = [p for piece in pieces for p in c.feed(piece)] + c.finish()
    assert joined(pairs) == (reasoning, content)
