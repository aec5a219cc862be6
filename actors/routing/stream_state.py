"""What a chat-completion stream has said so far, and how a restarted stream lines up with it.

Mid-stream failover needs two things from the stream that broke: what the
client has already been sent (to continue it elsewhere), and, when the
replacement backend starts over from the beginning, where the new text
catches up with the old so nothing reaches the client twice.

``StreamAccumulator`` folds parsed ``chat.completion.chunk`` objects into the
assistant turn so far (choice 0 only). ``Aligner`` compares a restarted
stream's text with what was already sent, piece by piece.

Pure: no I/O, no clock, no trio, no httpx.
"""

from __future__ import annotations

from typing import Any, Literal

DEFAULT_CAP_BYTES = 100 * 1024

ChunkKind = Literal["chunk", "error", "other"]


def classify(obj: Any) -> ChunkKind:
    """``"error"`` for an in-band ``{"error": ...}`` event, ``"chunk"`` for any other object.

    Anything that is not a JSON object (a list, a number, a string) is
    ``"other"``: no OpenAI-compatible server sends one.
    """
    if not isinstance(obj, dict):
        return "other"
    if obj.get("error") is not None:
        return "error"
    return "chunk"


class StreamAccumulator:
    """The assistant turn that a stream of chunks has built so far (choice index 0).

    Text (content, reasoning, tool-call names and arguments) is stored until
    it would pass ``cap_bytes`` (UTF-8); from then on ``capped`` is true, no
    more text is stored, and only the counters (``size_bytes``, ``deltas``)
    keep moving. A capped accumulator cannot replay the turn, so the caller
    should not rely on its text for a continuation.
    """

    def __init__(self, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.cap_bytes = cap_bytes
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, dict[str, Any]] = {}
        self.role: str | None = None
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.id: str | None = None
        self.created: int | None = None
        self.system_fingerprint: str | None = None
        self.error: Any = None            # the payload of an in-band {"error": ...}, if one came
        self.deltas = 0                   # non-empty content, reasoning and tool-argument deltas
        self.chunks = 0                   # chunk objects fed (errors included)
        self.size_bytes = 0               # UTF-8 bytes of all text seen, stored or not
        self.stored_bytes = 0             # UTF-8 bytes of the text kept
        self.capped = False
        self.other_choices = False        # a choice other than index 0 appeared (n > 1)

    # --- reading -------------------------------------------------------------

    @property
    def content(self) -> str:
        return "".join(self._content)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Merged tool calls in index order, each ``{"id", "type", "function": {"name", "arguments"}}``."""
        out = []
        for index in sorted(self._tools):
            t = self._tools[index]
            out.append({"index": index, "id": t["id"], "type": t["type"] or "function",
                        "function": {"name": t["name"], "arguments": "".join(t["arguments"])}})
        return out

    @property
    def complete(self) -> bool:
        """A finish_reason was seen: the backend said the turn is over."""
        return self.finish_reason is not None

    # --- feeding -------------------------------------------------------------

    def feed(self, obj: Any) -> ChunkKind:
        """Fold one parsed event payload in; returns what ``classify`` says it was."""
        kind = classify(obj)
        if kind == "other":
            return kind
        self.chunks += 1
        if kind == "error":
            self.error = obj["error"]
            return kind
        self._meta(obj)
        for choice in obj.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            if (choice.get("index") or 0) != 0:
                self.other_choices = True
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta)
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
        return kind

    def _meta(self, obj: dict[str, Any]) -> None:
        if obj.get("usage") is not None:
            self.usage = obj["usage"]
        # first seen wins: a continuation keeps the identity the client saw first
        if self.id is None and isinstance(obj.get("id"), str):
            self.id = obj["id"]
        if self.model is None and isinstance(obj.get("model"), str):
            self.model = obj["model"]
        if self.created is None and isinstance(obj.get("created"), int):
            self.created = obj["created"]
        if self.system_fingerprint is None and isinstance(obj.get("system_fingerprint"), str):
            self.system_fingerprint = obj["system_fingerprint"]

    def _delta(self, delta: dict[str, Any]) -> None:
        if self.role is None and isinstance(delta.get("role"), str):
            self.role = delta["role"]
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.deltas += 1
            self._text(self._content, content)
        # servers name it reasoning_content (vLLM, DeepSeek) or reasoning (newer
        # vLLM, OpenRouter); some send both with the same text, so take one
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.deltas += 1
            self._text(self._reasoning, reasoning)
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._tool_call(call)

    def _tool_call(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        if not isinstance(index, int):
            index = self._index_without_index(call.get("id"))
        slot = self._tools.setdefault(index, {"id": None, "type": None, "name": "", "arguments": []})
        if isinstance(call.get("id"), str) and call["id"]:
            slot["id"] = call["id"]
        if isinstance(call.get("type"), str) and call["type"]:
            slot["type"] = call["type"]
        function = call.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        # the name comes whole in one delta; a server that repeats it is not
        # concatenated. Names are short and always kept, even when capped.
        if isinstance(name, str) and name and name != slot["name"]:
            slot["name"] = name if not slot["name"] else slot["name"] + name
            self._count(name)
        arguments = function.get("arguments")
        if isinstance(arguments, str) and arguments:
            self.deltas += 1
            self._text(slot["arguments"], arguments)

    def _index_without_index(self, call_id: Any) -> int:
        """Some servers leave ``index`` out; a new id means a new call, otherwise the last one."""
        if isinstance(call_id, str) and call_id:
            for i, t in self._tools.items():
                if t["id"] == call_id:
                    return i
            return len(self._tools)
        return max(self._tools) if self._tools else 0

    def _count(self, text: str) -> bool:
        """Count ``text``; True when it may still be stored."""
        n = len(text.encode("utf-8"))
        self.size_bytes += n
        if self.capped or self.stored_bytes + n > self.cap_bytes:
            self.capped = True
            return False
        self.stored_bytes += n
        return True

    def _text(self, into: list[str], text: str) -> None:
        if self._count(text):
            into.append(text)


AlignState = Literal["repeating", "continuing", "diverged"]


class Aligner:
    """Lines a restarted stream up with the text the client already has.

    ``feed(piece)`` returns ``(emit, state)`` for each new piece of text:

    - ``"repeating"``: the piece lies inside what was already sent; emit nothing.
    - ``"continuing"``: the stream is past what was sent; emit the part beyond
      it (the tail of the piece that crossed the end, then whole pieces).
    - ``"diverged"``: the new text differs from what was sent; emit nothing,
      now and for every later piece (the caller decides what to do).

    The comparison is exact, whitespace included. Pieces may be split anywhere.
    When the new stream ends while ``state`` is still ``"repeating"`` it was
    shorter than what was sent: ``remaining`` says by how many characters.
    """

    def __init__(self, sent: str) -> None:
        self.sent = sent
        self.matched = 0  # characters of ``sent`` reproduced so far
        self.state: AlignState = "repeating" if sent else "continuing"

    @property
    def remaining(self) -> int:
        return len(self.sent) - self.matched

    @property
    def caught_up(self) -> bool:
        """The whole sent text has been reproduced (state is continuing)."""
        return self.state == "continuing"

    def feed(self, piece: str) -> tuple[str, AlignState]:
        if self.state == "diverged":
            return "", "diverged"
        if self.state == "continuing":
            return piece, "continuing"
        expected = self.sent[self.matched:self.matched + len(piece)]
        # ``expected`` is shorter than the piece only when it is all that is left of ``sent``
        if not piece.startswith(expected):
            self.state = "diverged"
            return "", "diverged"
        self.matched += len(expected)
        if self.matched == len(self.sent):
            self.state = "continuing"
        beyond = piece[len(expected):]
        if beyond:
            return beyond, "continuing"
        return "", "repeating"
