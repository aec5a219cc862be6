"""Thinking patterns on a stream: each chunk's ``delta.content`` split into reasoning and content.

The relay hands every parsed chunk of an attempt whose model has a thinking
pattern (``actors.routing.thinking.active``) to a ``ThinkingStream``, which
feeds choice 0's ``delta.content`` to the pure ``Splitter`` (or, with
``buffered: true``, the ``Classifier``) and gives back the chunks for the
client, in order:

- a chunk whose text is unchanged (content after the marker, or no text at
  all) passes as its own raw bytes;
- a changed chunk is re-encoded with ``reasoning_content`` and/or
  ``content`` in its delta; one left with an empty delta and nothing else to
  say (its text was all held back) is dropped;
- while the classifier is undecided, every chunk from the first text on is
  held (so order is kept) and released when it decides.

Text still held when the stream ends goes into the chunk carrying
``finish_reason``, or (``close``, at ``[DONE]`` without one) into a chunk of
its own.

The clock is the relay's: ``wants_timer`` says the first text is held and
nobody counts ``reasoning_timeout`` yet; ``timeout()`` is the decision at
the deadline.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from switchyard.actors.routing.thinking import (
    DEFAULT_MAX_BUFFER_SIZE,
    DEFAULT_REASONING_TIMEOUT,
    Classifier,
    Pair,
    Splitter,
    buffered,
    end_marker,
)
from switchyard.config.metadata import Thinking

Out = list[tuple[bytes, Any]]   # (raw bytes for the client, the object they encode)


class _Entry:
    __slots__ = ("obj", "pair", "piece", "raw")

    def __init__(self, obj: Any, raw: bytes, piece: str | None) -> None:
        self.obj = obj
        self.raw = raw
        self.piece = piece
        self.pair: Pair | None = None


class ThinkingStream:
    def __init__(self, thinking: Thinking) -> None:
        marker = end_marker(thinking)
        self.buffered = buffered(thinking)
        self.reasoning_timeout: float | None = None
        self._classifier: Classifier | None = None
        self._splitter: Splitter | None = None
        if self.buffered:
            self._classifier = Classifier(marker, thinking.max_buffer_size or DEFAULT_MAX_BUFFER_SIZE)
            self.reasoning_timeout = thinking.reasoning_timeout or DEFAULT_REASONING_TIMEOUT
        else:
            self._splitter = Splitter(marker)
        self.timer_started = False
        self.closed = False
        self._queue: deque[_Entry] = deque()
        self._template: dict[str, Any] | None = None   # id, model, ... of the last chunk, for a chunk of our own

    @property
    def in_content(self) -> bool:
        """Past the marker (or decided content): later text is content, unchanged."""
        if self._classifier is not None:
            return self._classifier.state == "content" or (
                self._classifier.state == "reasoning" and not self._classifier._splitter.in_reasoning)
        assert self._splitter is not None
        return not self._splitter.in_reasoning

    def continue_in_content(self) -> None:
        """This stream continues one that was already past its reasoning (a prefill or prompt resume)."""
        if self._classifier is not None:
            self._classifier.state = "content"
        else:
            assert self._splitter is not None
            self._splitter.in_reasoning = False

    @property
    def undecided(self) -> bool:
        return self._classifier is not None and self._classifier.state == "undecided"

    @property
    def wants_timer(self) -> bool:
        return self.undecided and not self.timer_started and bool(self._queue)

    def feed(self, obj: Any, raw: bytes) -> Out:
        if self.closed:
            return [(raw, obj)]
        piece = _piece(obj)
        finished = _finish_reason(obj)
        if piece is None and not self._queue and not finished:
            return [(raw, obj)]   # nothing to split, nothing held before it
        if isinstance(obj, dict):
            self._template = obj
        entry = _Entry(obj, raw, piece)
        self._queue.append(entry)
        if piece is not None:
            self._assign(self._split(piece))
        leftover: list[Pair] = []
        if finished:
            leftover = self._assign(self._end())
        return self._drain(leftover_into=entry if leftover else None, leftover=leftover)

    def _split(self, piece: str) -> list[Pair]:
        if self._classifier is not None:
            return self._classifier.feed(piece)
        assert self._splitter is not None
        return [self._splitter.feed(piece)]

    def timeout(self) -> Out:
        """``reasoning_timeout`` passed since the first text: decide on what arrived."""
        if self._classifier is None or self.closed:
            return []
        return self._drain(leftover=self._assign(self._classifier.timeout()))

    def close(self) -> Out:
        """The stream is complete ([DONE]): release whatever is still held."""
        if self.closed:
            return []
        leftover = self._assign(self._end())
        out = self._drain()
        if leftover and self._template is not None:
            obj: dict[str, Any] = {k: self._template[k] for k in ("id", "object", "created", "model")
                                   if k in self._template}
            obj["choices"] = [{"index": 0, "delta": _delta({}, _join(leftover)), "finish_reason": None}]
            out.append((_encode(obj), obj))
        return out

    # --- inside ---------------------------------------------------------------------

    def _end(self) -> list[Pair]:
        self.closed = True
        if self._classifier is not None:
            return self._classifier.finish()
        assert self._splitter is not None
        tail = self._splitter.finish()
        return [tail] if tail[0] else []

    def _assign(self, pairs: list[Pair]) -> list[Pair]:
        """Give each released pair to the next queued piece without one; the pairs left over."""
        it = iter(pairs)
        for entry in self._queue:
            if entry.piece is not None and entry.pair is None:
                pair = next(it, None)
                if pair is None:
                    return []
                entry.pair = pair
        return list(it)

    def _drain(self, leftover_into: _Entry | None = None, leftover: list[Pair] | None = None) -> Out:
        out: Out = []
        q = self._queue
        while q and (q[0].piece is None or q[0].pair is not None):
            entry = q.popleft()
            pair = entry.pair
            if entry is leftover_into and leftover:
                r, c = pair if pair is not None else ("", "")
                lr, lc = _join(leftover)
                pair = (r + lr, c + lc)
            if pair is None or pair == ("", entry.piece):
                out.append((entry.raw, entry.obj))
                continue
            rewritten = _rewrite(entry.obj, pair)
            if rewritten is not None:
                out.append((_encode(rewritten), rewritten))
        return out


def _piece(obj: Any) -> str | None:
    """Choice 0's non-empty ``delta.content``, if it has one."""
    try:
        choice = obj["choices"][0]
        content = choice["delta"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    if not isinstance(content, str) or not content or choice.get("index", 0) != 0:
        return None
    return content


def _finish_reason(obj: Any) -> bool:
    choices = obj.get("choices") if isinstance(obj, dict) else None
    if not isinstance(choices, list):
        return False   # a malformed chunk finishes nothing (as for the relay): no TypeError on {"choices": 5}
    return any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


def _join(pairs: list[Pair]) -> Pair:
    return "".join(r for r, _ in pairs), "".join(c for _, c in pairs)


def _delta(delta: dict[str, Any], pair: Pair) -> dict[str, Any]:
    out = {k: v for k, v in delta.items() if k != "content"}
    reasoning, content = pair
    if reasoning:
        before = out.get("reasoning_content")
        out["reasoning_content"] = (before if isinstance(before, str) else "") + reasoning
    if content:
        out["content"] = content
    return out


def _rewrite(obj: dict[str, Any], pair: Pair) -> dict[str, Any] | None:
    """``obj`` with choice 0's delta carrying ``pair``; None when nothing is left worth sending."""
    choices = list(obj.get("choices") or [])
    if not choices or not isinstance(choices[0], dict):
        return obj
    choice = dict(choices[0])
    choice["delta"] = _delta(choice.get("delta") or {}, pair)
    choices[0] = choice
    if not choice["delta"] and not choice.get("finish_reason") and len(choices) == 1 and obj.get("usage") is None:
        return None
    return {**obj, "choices": choices}


def _encode(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"
