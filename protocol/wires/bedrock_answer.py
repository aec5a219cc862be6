"""A Bedrock Converse answer, buffered or a ConverseStream event stream, as Chat Completions.

The answer side of the bedrock wire (``protocol/wires/bedrock.py``). Both
kinds are translated as they are read, through the same ``TranslatedStream``
the anthropic wire uses, so the relay's budgets (first byte, chunk
interval, total) hold unchanged.

A stream is ``application/vnd.amazon.eventstream``: binary frames (prelude,
headers, JSON payload, CRCs) decoded by botocore's ``EventStreamBuffer``.
``messageStart`` sends nothing, so an exception frame before the first
content is still a pre-stream failure that fails over; ``contentBlockStart``
with a ``toolUse`` opens a tool call; ``contentBlockDelta`` carries text,
tool input pieces and reasoning; ``messageStop`` the finish reason;
``metadata`` the usage (a usage chunk when the attempt asked for
``stream_options.include_usage``), then ``[DONE]``. An exception or error
frame, a frame that fails its checksum or a stream cut inside a frame
becomes the in-band ``{"error": ...}`` event the relay treats as a failed
attempt.

Error answers get our envelope and status (``errors.py`` beside this).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from botocore.eventstream import EventStreamBuffer, ParserError

from switchyard.protocol.http.client_json import utf8
from switchyard.protocol.wires.translated import DONE, ChunkWriter, WholeBody
from switchyard.protocol.wires.translated import data as _data

FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
          "guardrail_intervened": "content_filter", "content_filtered": "content_filter",
          "model_context_window_exceeded": "length"}


def finish_reason(stop_reason: Any) -> str:
    return FINISH.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def chat_usage(usage: Any) -> dict[str, Any]:
    """Converse usage as chat usage: cache reads and writes are prompt tokens too (the reads
    ``prompt_tokens_details.cached_tokens``, the writes ``cache_write_tokens``)."""
    usage = usage if isinstance(usage, dict) else {}
    cached, written = _count(usage.get("cacheReadInputTokens")), _count(usage.get("cacheWriteInputTokens"))
    prompt = _count(usage.get("inputTokens")) + written + cached
    completion = _count(usage.get("outputTokens"))
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                           "total_tokens": prompt + completion}
    details = {k: v for k, v in (("cached_tokens", cached), ("cache_write_tokens", written)) if v}
    if details:
        out["prompt_tokens_details"] = details
    return out


def new_id(request_id: str | None) -> str:
    return "chatcmpl-" + (request_id or uuid.uuid4().hex)


def chat_completion(answer: dict[str, Any], model: str, request_id: str | None, created: int) -> dict[str, Any]:
    """A Converse answer as a ``chat.completion``."""
    output = answer.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append({"id": use.get("toolUseId"), "type": "function", "function": {
                "name": use.get("name"), "arguments": json.dumps(use.get("input") or {}, ensure_ascii=False)}})
        elif isinstance(block.get("reasoningContent"), dict):
            text = (block["reasoningContent"].get("reasoningText") or {}).get("text")
            if isinstance(text, str):
                reasoning.append(text)
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if reasoning:
        reply["reasoning_content"] = "".join(reasoning)
    if calls:
        reply["tool_calls"] = calls
    return {"id": new_id(request_id), "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": reply, "finish_reason": finish_reason(answer.get("stopReason")),
                         "logprobs": None}],
            "usage": chat_usage(answer.get("usage"))}


class BufferedTranslator(WholeBody):
    """The whole Converse answer, then one chat.completion; anything else goes as it came."""

    def __init__(self, model: str, request_id: str | None, created: int) -> None:
        super().__init__()
        self.model, self.request_id, self.created = model, request_id, created

    def translate(self, parsed: Any, raw: bytes) -> list[bytes]:
        if not isinstance(parsed, dict) or "output" not in parsed:
            return [raw]       # not JSON (the relay says so), or not an answer: judged as it came
        return [utf8(chat_completion(parsed, self.model, self.request_id, self.created))]


class StreamTranslator(ChunkWriter):
    """ConverseStream frames in, chat.completion.chunk events out (pure: no I/O, no clock)."""

    backend = "bedrock"

    def __init__(self, model: str, request_id: str | None, include_usage: bool, created: int) -> None:
        super().__init__(model, created, new_id(request_id))
        self.buffer = EventStreamBuffer()
        self.include_usage = include_usage
        self.tools: dict[object, int] = {}   # content block index (as the backend sent it) -> tool call index
        self.finished = False             # the finish_reason chunk went out
        self.fed = self.parsed = 0        # bytes received, and those of whole frames

    def feed(self, chunk: bytes) -> list[bytes]:
        if self.over:
            return []
        self.buffer.add_data(chunk)
        self.fed += len(chunk)
        out: list[bytes] = []
        try:
            for message in self.buffer:
                self.parsed += message.prelude.total_length
                out.extend(self._frame(message.headers, message.payload))
                if self.over:
                    break
        except ParserError as exc:
            out.extend(self.fail(f"a malformed event stream frame ({type(exc).__name__}: {exc})",
                                  "upstream_malformed_event"))
        return out

    def close(self) -> list[bytes]:
        if self.over:
            return []
        if self.fed != self.parsed:
            return self.fail("a frame cut short at its end", "upstream_stream_truncated")
        if self.finished:   # messageStop without metadata: the answer is whole
            self.over = True
            return [DONE]
        return []   # the relay judges an end without a finish reason

    def _frame(self, headers: dict[str, Any], payload: bytes) -> list[bytes]:
        kind = headers.get(":message-type")
        if kind == "exception":
            return self._error(str(headers.get(":exception-type") or "exception"), payload)
        if kind == "error":
            code = str(headers.get(":error-code") or "error")
            return self._error(code, json.dumps({"message": headers.get(":error-message") or code}).encode())
        if kind != "event":
            return []
        try:
            obj = json.loads(payload) if payload else {}
        except ValueError:
            return self.fail("an event whose payload is not JSON", "upstream_malformed_event")
        if not isinstance(obj, dict):
            return self.fail("an event whose payload is not a JSON object", "upstream_malformed_event")
        event = headers.get(":event-type")
        if event == "contentBlockStart":
            start = obj.get("start")
            if not isinstance(start, dict):
                start = {}
            use = start.get("toolUse")
            if isinstance(use, dict):
                index = obj.get("contentBlockIndex")
                self.tools[index] = n = len(self.tools)
                return [self.chunk({"tool_calls": [{"index": n, "id": use.get("toolUseId"), "type": "function",
                                                     "function": {"name": use.get("name"), "arguments": ""}}]})]
            return []
        if event == "contentBlockDelta":
            return self._delta(obj.get("contentBlockIndex"), obj.get("delta"))
        if event == "messageStop":
            self.finished = True
            return [self.chunk({}, finish_reason(obj.get("stopReason")))]
        if event == "metadata":
            if not self.finished:
                return self.fail("usage before the message's stop reason", "upstream_stream_truncated")
            self.over = True
            if not self.include_usage:
                return [DONE]
            return [self.usage_chunk(chat_usage(obj.get("usage"))), DONE]
        return []   # messageStart, contentBlockStop and events this does not know say nothing

    def _delta(self, index: Any, delta: Any) -> list[bytes]:
        if not isinstance(delta, dict):
            return []
        if isinstance(delta.get("text"), str) and delta["text"]:
            return [self.chunk({"content": delta["text"]})]
        use = delta.get("toolUse")
        if isinstance(use, dict) and isinstance(use.get("input"), str) and use["input"] and index in self.tools:
            return [self.chunk({"tool_calls": [{"index": self.tools[index], "function": {"arguments": use["input"]}}]})]
        reasoning = delta.get("reasoningContent")
        if isinstance(reasoning, dict) and isinstance(reasoning.get("text"), str) and reasoning["text"]:
            return [self.chunk({"reasoning_content": reasoning["text"]})]
        return []

    def _error(self, code: str, payload: bytes) -> list[bytes]:
        try:
            message = json.loads(payload).get("message")
        except (ValueError, AttributeError):
            message = payload.decode("utf-8", "replace")[:500]
        self.over = True
        return [_data({"error": {"message": f"bedrock stream {code}: {message or code}", "type": "upstream_error",
                                 "code": code}})]
