"""Thinking patterns: splitting a model's text into reasoning and content.

Some models write their reasoning into ``content`` and mark its end with a
marker such as ``</think>``, never its start (``pattern: unterminated_start``).
With ``assume_reasoning_first: true`` everything before the marker is
reasoning and everything after it is content; the marker itself goes to
neither.

``Splitter`` does that piece by piece: each content piece fed gives one
``(reasoning, content)`` pair. A marker may arrive split across pieces, so
the splitter holds back only the tail of the text that could still be the
start of the marker, and releases it with the next piece (or with
``finish``) once it is known not to be one. After the marker it holds
nothing: every later piece is content, unchanged (a second marker is text).

``Classifier`` is the buffered mode (``buffered: true``): instead of
guessing, it holds pieces until it can tell what arrived. The marker
arriving decides "reasoning first" (the held pieces go through a
``Splitter``); otherwise the first of these decides "it was all content":
the held text passing ``max_buffer_size`` UTF-8 bytes, the caller reporting
the ``reasoning_timeout`` as elapsed (``timeout``; the caller owns the clock
and counts from the first piece), or the stream ending (``finish``). Once
decided, content passes through unchanged. Each call returns the pairs of
the pieces it released, in order, one pair per piece.

Pure: no clock, no I/O, no trio.
"""

from __future__ import annotations

from typing import Literal

from switchyard.config.metadata import THINKING_PATTERNS, Thinking

UNTERMINATED_START = "unterminated_start"
PATTERNS = THINKING_PATTERNS
DEFAULT_END_MARKER = "</think>"
DEFAULT_MAX_BUFFER_SIZE = 51_200      # bytes: the spec's example value
DEFAULT_REASONING_TIMEOUT = 10.0      # seconds: the spec's example value

Pair = tuple[str, str]    # (reasoning, content)


class Splitter:
    """Reasoning until the end marker, content after it; one pair per piece fed."""

    __slots__ = ("_held", "in_reasoning", "marker")

    def __init__(self, marker: str = DEFAULT_END_MARKER) -> None:
        if not marker:
            raise ValueError("the end marker must not be empty")
        self.marker = marker
        self.in_reasoning = True
        self._held = ""     # a tail that may be the start of the marker

    def feed(self, piece: str) -> Pair:
        if not self.in_reasoning:
            return "", piece
        text = self._held + piece
        at = text.find(self.marker)
        if at >= 0:
            self.in_reasoning = False
            self._held = ""
            return text[:at], text[at + len(self.marker):]
        keep = _partial_marker(text, self.marker)
        self._held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep], ""

    def finish(self) -> Pair:
        """The stream ended: a held tail was no marker after all, so it was reasoning."""
        held, self._held = self._held, ""
        return held, ""


def _partial_marker(text: str, marker: str) -> int:
    """The length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


State = Literal["undecided", "reasoning", "content"]


class Classifier:
    """Buffered classification: hold the pieces until what arrived decides them."""

    __slots__ = ("_bytes", "_pieces", "_splitter", "_text", "marker", "max_buffer_size", "state")

    def __init__(self, marker: str = DEFAULT_END_MARKER, max_buffer_size: int | None = DEFAULT_MAX_BUFFER_SIZE) -> None:
        self.marker = marker
        self.max_buffer_size = max_buffer_size
        self.state: State = "undecided"
        self._pieces: list[str] = []
        self._text = ""
        self._bytes = 0
        self._splitter = Splitter(marker)

    @property
    def holding(self) -> int:
        """How many pieces are held."""
        return len(self._pieces)

    def feed(self, piece: str) -> list[Pair]:
        if self.state == "reasoning":
            return [self._splitter.feed(piece)]
        if self.state == "content":
            return [("", piece)]
        start = max(0, len(self._text) - len(self.marker) + 1)   # only new text can complete the marker
        self._pieces.append(piece)
        self._text += piece
        self._bytes += len(piece.encode())
        if self._text.find(self.marker, start) >= 0:
            return self._release("reasoning")
        if self.max_buffer_size is not None and self._bytes > self.max_buffer_size:
            return self._release("content")
        return []

    def timeout(self) -> list[Pair]:
        """The reasoning timeout passed with no marker: what was held is content."""
        return self._release("content") if self.state == "undecided" else []

    def finish(self) -> list[Pair]:
        """The stream ended: no marker came, so it was all content."""
        if self.state == "undecided":
            return self._release("content")
        if self.state == "reasoning":
            tail = self._splitter.finish()
            return [tail] if tail[0] else []
        return []

    def _release(self, state: State) -> list[Pair]:
        self.state = state
        pieces, self._pieces, self._text = self._pieces, [], ""
        if state == "content":
            return [("", p) for p in pieces]
        return [self._splitter.feed(p) for p in pieces]


def active(thinking: Thinking | None) -> bool:
    """Whether ``thinking`` metadata asks for any rewriting at all.

    Only ``unterminated_start`` with ``assume_reasoning_first: true`` does;
    any other pattern (or none) leaves the stream untouched.
    """
    return thinking is not None and thinking.pattern == UNTERMINATED_START and bool(thinking.assume_reasoning_first)


def buffered(thinking: Thinking) -> bool:
    return active(thinking) and bool(thinking.buffered)


def end_marker(thinking: Thinking) -> str:
    return thinking.end_marker or DEFAULT_END_MARKER
