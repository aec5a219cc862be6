"""An Anthropic Messages answer, buffered or SSE, as Chat Completions.

``chat_answer`` is the answer side of the anthropic wire
(``protocol/wires/anthropic.py``). An error status passes untouched: failover
classifies by status, and the client gets the backend's own body. A success
gets a body that translates as it is read, so a stream stays a stream: a
``TranslatedStream`` is an ``httpx.AsyncByteStream`` that is its own
iterator (no generator left suspended), can be abandoned at any await (a
cancelled read leaves no half-made output; the caller then closes the
response), and closes the backend's response when it is closed.

Streams: ``message_start`` alone sends nothing, so the client is committed
only by the first content and an ``overloaded_error`` right after it is
still a pre-stream failure that fails over. ``ping`` becomes an SSE comment
(a keep-alive once committed). Text, ``tool_use`` blocks (id, name, then the
``input_json_delta`` pieces as ``arguments``) and thinking
(``reasoning_content``) become chunk deltas; ``message_delta`` the final
chunk with ``finish_reason``; ``message_stop`` the usage chunk when the
client asked for ``stream_options.include_usage``, then ``[DONE]``. An
``error`` event becomes the in-band ``{"error": ...}`` event the relay
treats as a failed attempt; an event that is not JSON is passed on for the
relay to judge malformed. Event types this does not know are skipped, as
Anthropic asks of clients.
"""

from __future__ import annotations

import json
import time
from typing import Any, AsyncIterator, Protocol

import httpx

from switchyard.actors.messages import Call
from switchyard.protocol.http.client_json import utf8
from switchyard.actors.sse import Event, SSEDecoder, SSEEventTooLarge, encode_data
from switchyard.actors.bodies import body_chunks

DONE = b"data: [DONE]\n\n"
FINISH = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
          "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}
_HOP_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding", "content-type"})


def finish_reason(stop_reason: Any) -> str:
    return FINISH.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def chat_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """Messages usage as chat usage: every input token (cache writes and reads too) is a prompt token."""
    cached = _count(usage.get("cache_read_input_tokens"))
    prompt = _count(usage.get("input_tokens")) + _count(usage.get("cache_creation_input_tokens")) + cached
    completion = _count(usage.get("output_tokens"))
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def chat_completion(message: dict[str, Any], created: int) -> dict[str, Any]:
    """A Messages ``message`` object as a ``chat.completion``."""
    texts: list[str] = []
    reasoning: list[str] = []
    blocks: list[dict[str, Any]] = []   # the thinking blocks as sent, for a Messages client to send back
    calls: list[dict[str, Any]] = []
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            reasoning.append(block["thinking"])
            blocks.append({"type": "thinking", "thinking": block["thinking"],
                           "signature": block.get("signature") if isinstance(block.get("signature"), str) else ""})
        elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
            blocks.append({"type": "redacted_thinking", "data": block["data"]})
        elif kind == "tool_use":
            calls.append({"id": block.get("id"), "type": "function", "function": {
                "name": block.get("name"), "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if reasoning:
        reply["reasoning_content"] = "".join(reasoning)
    if blocks:   # signed and redacted blocks as they came (an extra field chat clients ignore)
        reply["reasoning_blocks"] = blocks
    if calls:
        reply["tool_calls"] = calls
    return {"id": message.get("id"), "object": "chat.completion", "created": created, "model": message.get("model"),
            "choices": [{"index": 0, "message": reply, "finish_reason": finish_reason(message.get("stop_reason")),
                         "logprobs": None}],
            "usage": chat_usage(_obj(message.get("usage")))}


class Translator(Protocol):
    def feed(self, chunk: bytes) -> list[bytes]: ...
    def close(self) -> list[bytes]: ...


class BufferedTranslator:
    """The whole body, then one chat.completion; anything but a ``message`` object goes as it came."""

    def __init__(self, created: int) -> None:
        self.created = created
        self.parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        self.parts.append(chunk)
        return []

    def close(self) -> list[bytes]:
        raw = b"".join(self.parts)
        try:
            obj = json.loads(raw)
        except ValueError:
            return [raw]       # not JSON: the relay says so
        if not isinstance(obj, dict) or obj.get("type") != "message":
            return [raw]       # an error object on a 200, or something else: judged as it came
        return [json.dumps(chat_completion(obj, self.created)).encode()]


class StreamTranslator:
    """Anthropic SSE events in, chat.completion.chunk events out (pure: no I/O, no clock)."""

    def __init__(self, include_usage: bool, created: int) -> None:
        self.decoder = SSEDecoder()
        self.include_usage = include_usage
        self.created = created
        self.id = ""
        self.model = ""
        self.role_sent = False
        self.tools: dict[int, int] = {}      # content block index -> tool call index
        self.finished = False                # the finish_reason chunk went out
        self.over = False                    # [DONE] or an error went out: nothing follows
        self.usage: dict[str, Any] = {}

    def feed(self, chunk: bytes) -> list[bytes]:
        try:
            events = self.decoder.feed(chunk)
        except SSEEventTooLarge as exc:
            return self._fail(f"an event too large to handle: {exc}", "upstream_event_too_large")
        out: list[bytes] = []
        for event in events:
            out.extend(self._event(event))
        return out

    def close(self) -> list[bytes]:
        tail = self.decoder.close()
        return self._event(tail) if tail is not None and tail.complete else []

    def _event(self, event: Event) -> list[bytes]:
        if self.over:
            return []
        if not event.has_data:
            return [event.raw]      # comments: keep-alives once committed
        try:
            obj = json.loads(event.data)
        except ValueError:
            return [encode_data(event.data)]   # the relay counts it malformed and fails the attempt
        if not isinstance(obj, dict):
            return self._fail("an event that is not a JSON object", "upstream_malformed_event")
        kind = obj.get("type") or event.event
        if kind == "message_start":
            message = _obj(obj.get("message"))
            self.id, self.model = str(message.get("id") or ""), str(message.get("model") or "")
            self._usage(message.get("usage"))
            return []
        if kind == "ping":
            return [b": ping\n\n"]
        if kind in ("content_block_start", "content_block_delta"):
            index = obj.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                return self._fail(f"a {kind} event without an integer index", "upstream_malformed_event")
            if kind == "content_block_start":
                return self._block(index, _obj(obj.get("content_block")))
            return self._delta(index, _obj(obj.get("delta")))
        if kind == "message_delta":
            self._usage(obj.get("usage"))
            self.finished = True
            return [self._chunk({}, finish_reason(_obj(obj.get("delta")).get("stop_reason")))]
        if kind == "message_stop":
            if not self.finished:
                return self._fail("the end of the message without a stop reason", "upstream_stream_truncated")
            self.over = True
            if not self.include_usage:
                return [DONE]
            usage = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                     "choices": [], "usage": chat_usage(self.usage)}
            return [_data(usage), DONE]
        if kind == "error":
            error = _obj(obj.get("error"))
            self.over = True
            return [_data({"error": {"message": error.get("message") or "error", "type": error.get("type"),
                                     "code": error.get("type")}})]
        return []

    def _block(self, index: int, block: dict[str, Any]) -> list[bytes]:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            return [self._chunk({"content": block["text"]})]
        if kind == "thinking" and block.get("thinking"):
            return [self._chunk({"reasoning_content": block["thinking"]})]
        if kind == "redacted_thinking" and isinstance(block.get("data"), str):
            return [self._chunk({"reasoning_redacted": block["data"]})]
        if kind == "tool_use":
            self.tools[index] = n = len(self.tools)
            return [self._chunk({"tool_calls": [{"index": n, "id": block.get("id"), "type": "function",
                                                 "function": {"name": block.get("name"), "arguments": ""}}]})]
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[bytes]:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [self._chunk({"content": delta["text"]})]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [self._chunk({"reasoning_content": delta["thinking"]})]
        if kind == "signature_delta" and delta.get("signature"):
            return [self._chunk({"reasoning_signature": delta["signature"]})]
        if kind == "input_json_delta" and delta.get("partial_json") and index in self.tools:
            return [self._chunk({"tool_calls": [{"index": self.tools[index],
                                                 "function": {"arguments": delta["partial_json"]}}]})]
        return []

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):   # message_delta's counts are cumulative; nulls say nothing
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if not self.role_sent:
            self.role_sent = True
            delta = {"role": "assistant", **delta}
        return _data({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    def _fail(self, what: str, code: str) -> list[bytes]:
        self.over = True
        return [_data({"error": {"message": f"the anthropic stream carried {what}", "type": "upstream_error",
                                 "code": code}})]


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + utf8(payload, separators=(",", ":")) + b"\n\n"


class TranslatedStream(httpx.AsyncByteStream):
    """The backend's body, translated chunk by chunk; closing it closes the backend's response."""

    def __init__(self, upstream: httpx.Response, translator: Translator) -> None:
        self.upstream = upstream
        self.translator = translator
        self._chunks: AsyncIterator[bytes] | None = None
        self._ended = False

    def __aiter__(self) -> "TranslatedStream":
        return self

    async def __anext__(self) -> bytes:
        if self._chunks is None:
            self._chunks = body_chunks(self.upstream).__aiter__()
        while not self._ended:
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._ended = True
                out = self.translator.close()
            else:
                out = self.translator.feed(chunk)
            if out:
                return b"".join(out)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._ended = True
        await self.upstream.aclose()


def chat_answer(response: httpx.Response, call: Call) -> httpx.Response:
    """The backend's answer as chat: an error status as it is, a success translated as it is read."""
    if response.status_code >= 300:
        return response
    created = int(time.time())
    translator: Translator
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        options = call.payload.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage") is True
        translator, content_type = StreamTranslator(asked, created), "text/event-stream"
    else:
        translator, content_type = BufferedTranslator(created), "application/json"
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _HOP_HEADERS]
    return httpx.Response(response.status_code, headers=[*headers, ("content-type", content_type)],
                          stream=TranslatedStream(response, translator))
