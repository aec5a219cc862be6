"""An Anthropic Messages answer, buffered or SSE, as Chat Completions.

``chat_answer`` is the answer side of the anthropic wire
(``protocol/wires/anthropic.py``). An error status passes untouched: failover
classifies by status, and the client gets the backend's own body. A success
gets a body that translates as it is read (``protocol/wires/translated.py``),
so a stream stays a stream.

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
from typing import Any

import httpx

from switchyard.actors.messages import Call
from switchyard.actors.sse import Event
from switchyard.protocol.wires.translated import DONE, EventTranslator, Translator, WholeBody, translated
from switchyard.protocol.wires.translated import data as _data
from switchyard.protocol.wires.translated import obj as _obj

FINISH = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
          "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}


def finish_reason(stop_reason: Any) -> str:
    return FINISH.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def chat_usage(usage: dict[str, Any]) -> dict[str, Any]:
    """Messages usage as chat usage: every input token (cache writes and reads too) is a prompt token; the
    reads are ``prompt_tokens_details.cached_tokens``, the writes ``cache_write_tokens`` (the Responses
    usage's name), so the ledger prices each at its rate."""
    cached, written = _count(usage.get("cache_read_input_tokens")), _count(usage.get("cache_creation_input_tokens"))
    prompt = _count(usage.get("input_tokens")) + written + cached
    completion = _count(usage.get("output_tokens"))
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    details = {k: v for k, v in (("cached_tokens", cached), ("cache_write_tokens", written)) if v}
    if details:
        out["prompt_tokens_details"] = details
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


class BufferedTranslator(WholeBody):
    """The whole body, then one chat.completion; anything but a ``message`` object goes as it came."""

    def __init__(self, created: int) -> None:
        super().__init__()
        self.created = created

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        if not isinstance(parsed, dict) or parsed.get("type") != "message":
            return [raw]       # not JSON (the relay says so), an error object on a 200, or something else
        return [json.dumps(chat_completion(parsed, self.created)).encode()]


class StreamTranslator(EventTranslator):
    """Anthropic SSE events in, chat.completion.chunk events out (pure: no I/O, no clock)."""

    backend = "anthropic"

    def __init__(self, include_usage: bool, created: int) -> None:
        super().__init__("", created)       # id and model come with message_start
        self.include_usage = include_usage
        self.tools: dict[int, int] = {}      # content block index -> tool call index
        self.finished = False                # the finish_reason chunk went out
        self.usage: dict[str, Any] = {}

    def object_event(self, obj: dict[str, Any], event: Event) -> list[bytes]:
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
                return self.fail(f"a {kind} event without an integer index", "upstream_malformed_event")
            if kind == "content_block_start":
                return self._block(index, _obj(obj.get("content_block")))
            return self._delta(index, _obj(obj.get("delta")))
        if kind == "message_delta":
            self._usage(obj.get("usage"))
            self.finished = True
            return [self.chunk({}, finish_reason(_obj(obj.get("delta")).get("stop_reason")))]
        if kind == "message_stop":
            if not self.finished:
                return self.fail("the end of the message without a stop reason", "upstream_stream_truncated")
            self.over = True
            if not self.include_usage:
                return [DONE]
            return [self.usage_chunk(chat_usage(self.usage)), DONE]
        if kind == "error":
            error = _obj(obj.get("error"))
            self.over = True
            return [_data({"error": {"message": error.get("message") or "error", "type": error.get("type"),
                                     "code": error.get("type")}})]
        return []

    def _block(self, index: int, block: dict[str, Any]) -> list[bytes]:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            return [self.chunk({"content": block["text"]})]
        if kind == "thinking" and block.get("thinking"):
            return [self.chunk({"reasoning_content": block["thinking"]})]
        if kind == "redacted_thinking" and isinstance(block.get("data"), str):
            return [self.chunk({"reasoning_redacted": block["data"]})]
        if kind == "tool_use":
            self.tools[index] = n = len(self.tools)
            return [self.chunk({"tool_calls": [{"index": n, "id": block.get("id"), "type": "function",
                                                 "function": {"name": block.get("name"), "arguments": ""}}]})]
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[bytes]:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [self.chunk({"content": delta["text"]})]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [self.chunk({"reasoning_content": delta["thinking"]})]
        if kind == "signature_delta" and delta.get("signature"):
            return [self.chunk({"reasoning_signature": delta["signature"]})]
        if kind == "input_json_delta" and delta.get("partial_json") and index in self.tools:
            return [self.chunk({"tool_calls": [{"index": self.tools[index],
                                                 "function": {"arguments": delta["partial_json"]}}]})]
        return []

    def _usage(self, usage: Any) -> None:
        if isinstance(usage, dict):   # message_delta's counts are cumulative; nulls say nothing
            self.usage.update({k: v for k, v in usage.items() if v is not None})


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
    return translated(response, translator, content_type)
