"""The answer of the Messages ingress: chat in, Anthropic out, and the ResponseSink that does it.

The RequestActor, the relay and dedup write chat: a buffered chat.completion
or a chat SSE stream ending in ``[DONE]``. ``AnthropicSink`` wraps the plain
``AsgiSink`` and translates on the way out, with the pure translators below
(``message_from_chat``, ``StreamTranslator``):

- buffered: the chat JSON is held until ``finish``, then goes out as one
  Messages object; a body that cannot be translated becomes a 502
  ``api_error`` instead;
- streaming: message_start and a ping go out with the status line; each chat
  event becomes its Messages events, a keep-alive comment a ping, and
  ``[DONE]`` the closing message_delta and message_stop;
- errors: before the start, an Anthropic error body with the error's own
  status and headers; after it, an ``event: error`` and the end of the
  stream, with no message_stop, so no client takes the answer for whole.

A continuation that told a chat client to discard what it had
(``route_change``) cannot be said in Messages: the stream ends there with an
``event: error``, and what follows is not sent.

Every answer carries ``request-id``: the router's request id, or the one a
native Anthropic backend sent.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from switchyard.actors.errors import GatewayError, UpstreamProtocolError
from switchyard.actors.sse import SSEDecoder
from switchyard.protocol.doors.anthropic_errors import anthropic_envelope
from switchyard.protocol.http.asgi import AsgiSink, Send, respond
from switchyard.protocol.http.client_json import utf8

JSON_TYPE = b"application/json"
SSE_TYPE = b"text/event-stream; charset=utf-8"
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                "content_filter": "refusal"}


# --- the answer, translated ----------------------------------------------------------

def usage_of(usage: Any) -> dict[str, Any]:
    """Chat usage as Messages usage; cached prompt tokens are Anthropic's cache reads and written ones its
    cache writes (``cache_creation_input_tokens``), neither counted in ``input_tokens``."""
    if not isinstance(usage, dict):
        return {"input_tokens": 0, "output_tokens": 0}
    prompt = usage.get("prompt_tokens")
    prompt = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else 0
    output = usage.get("completion_tokens")
    out: dict[str, Any] = {"input_tokens": prompt,
                           "output_tokens": output if isinstance(output, int) and output >= 0 else 0}
    details = usage.get("prompt_tokens_details")
    for name, messages_name in (("cached_tokens", "cache_read_input_tokens"),
                                ("cache_write_tokens", "cache_creation_input_tokens")):
        count = details.get(name) if isinstance(details, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and 0 <= count <= out["input_tokens"]:
            out["input_tokens"] -= count
            out[messages_name] = count
    cost = usage.get("cost")   # the gateway's price of the call (USD), carried as the Chat door shows it
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        out["cost"] = cost
    return out


def stop_of(choice: dict[str, Any], stop_sequences: tuple[str, ...], used_tools: bool,
            refused: bool) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence) for a chat choice's finish_reason."""
    reason = choice.get("finish_reason")
    if refused:
        return "refusal", None
    if reason in ("stop", None):
        matched = choice.get("stop_reason")   # vLLM and SGLang say which stop string ended the answer
        if reason == "stop" and isinstance(matched, str) and matched in stop_sequences:
            return "stop_sequence", matched
        # Some servers end a tool call with "stop": the client must still run its tools.
        return ("tool_use" if used_tools else "end_turn"), None
    return STOP_REASONS.get(reason, "end_turn") if isinstance(reason, str) else "end_turn", None


def tool_id() -> str:
    return "toolu_" + secrets.token_hex(12)


def _arguments(raw: Any, name: Any) -> dict[str, Any]:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise UpstreamProtocolError(f"The backend called the tool {name!r} with arguments that are not a JSON "
                                    "object; a tool_use block's input must be one")
    return value


def message_from_chat(payload: Any, *, message_id: str, model: str, stop_sequences: tuple[str, ...] = (),
                      show_thinking: bool = True) -> dict[str, Any]:
    """A chat.completion as a Messages object (only the first choice: Messages has no ``n``)."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise UpstreamProtocolError("The backend's answer has no choices to translate into a message")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    content: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    blocks = message.get("reasoning_blocks")
    if isinstance(blocks, list) and blocks:
        # A native backend's blocks, each with its signature (or redacted data), so the client can send
        # them back in a tool loop; display "omitted" keeps the block and its signature, not its text.
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "redacted_thinking":
                content.append({"type": "redacted_thinking", "data": block.get("data", "")})
            elif isinstance(block, dict):
                content.append({"type": "thinking", "thinking": block.get("thinking", "") if show_thinking else "",
                                "signature": block.get("signature", "")})
    elif show_thinking and isinstance(reasoning, str) and reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    text = message.get("content")
    if isinstance(text, list):   # content parts
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict) and isinstance(p.get("text"), str))
    if isinstance(text, str) and text:
        content.append({"type": "text", "text": text})
    refusal = message.get("refusal")
    refused = isinstance(refusal, str) and bool(refusal)
    if refused:
        content.append({"type": "text", "text": refusal})
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        calls = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise UpstreamProtocolError("The backend's answer has a tool call without a function")
        content.append({"type": "tool_use", "id": call.get("id") or tool_id(), "name": function.get("name") or "",
                        "input": _arguments(function.get("arguments"), function.get("name"))})
    stop_reason, stop_sequence = stop_of(choice, stop_sequences, bool(calls), refused)
    return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason, "stop_sequence": stop_sequence, "usage": usage_of(payload.get("usage"))}


# --- the stream -------------------------------------------------------------------------

def encode(name: str, data: dict[str, Any]) -> bytes:
    """One Messages SSE event: its ``event:`` line, then its JSON (which repeats the name as ``type``)."""
    return b"event: " + name.encode() + b"\ndata: " + utf8(data, separators=(",", ":")) + b"\n\n"


PING = encode("ping", {"type": "ping"})


class StreamTranslator:
    """Chat chunks in, the Messages event sequence out (as bytes).

    ``begin`` is message_start and a ping; each chunk opens, feeds and closes
    content blocks (thinking, text, one tool_use per tool call) in the order
    they come; ``end`` closes the open block and sends message_delta (stop
    reason, usage) and message_stop. Usage arrives last in a chat stream (the
    chunk ``stream_options.include_usage`` asks for), so message_start says
    0 tokens and message_delta carries the real input and output counts.
    """

    def __init__(self, message_id: str, model: str, stop_sequences: tuple[str, ...] = (),
                 show_thinking: bool = True) -> None:
        self.message_id = message_id
        self.model = model
        self.stop_sequences = stop_sequences
        self.show_thinking = show_thinking
        self.blocks = 0                     # blocks opened so far (the next one's index)
        self.open: tuple[str, int] | None = None   # (kind, chat tool index or -1) of the open block
        self.tools: dict[int, int] = {}     # chat tool call index -> its block's index
        self.choice: dict[str, Any] = {}    # the last choice seen with a finish_reason
        self.refused = False
        self.usage: Any = None
        self.ended = False

    def begin(self) -> bytes:
        message: dict[str, Any] = {"id": self.message_id, "type": "message", "role": "assistant", "model": self.model,
                                   "content": [], "stop_reason": None, "stop_sequence": None,
                                   "usage": {"input_tokens": 0, "output_tokens": 0}}
        return encode("message_start", {"type": "message_start", "message": message}) + PING

    def feed(self, chunk: Any) -> bytes:
        if self.ended or not isinstance(chunk, dict):
            return b""
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return b""
        choice = choices[0]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        out: list[bytes] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if self.show_thinking and isinstance(reasoning, str) and reasoning:
            index = self._block(out, ("thinking", -1), {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta(index, {"type": "thinking_delta", "thinking": reasoning}))
        signature = delta.get("reasoning_signature")
        if isinstance(signature, str) and signature:   # display "omitted" too: the block, empty, with its signature
            index = self._block(out, ("thinking", -1), {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta(index, {"type": "signature_delta", "signature": signature}))
        redacted = delta.get("reasoning_redacted")
        if isinstance(redacted, str):
            self._block(out, ("redacted", self.blocks), {"type": "redacted_thinking", "data": redacted})
            self._close(out)
        for key in ("content", "refusal"):
            text = delta.get(key)
            if isinstance(text, str) and text:
                self.refused = self.refused or key == "refusal"
                index = self._block(out, ("text", -1), {"type": "text", "text": ""})
                out.append(self._delta(index, {"type": "text_delta", "text": text}))
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                self._tool(out, call)
        if choice.get("finish_reason"):
            self.choice = choice
            self._close(out)
        return b"".join(out)

    def end(self) -> bytes:
        """The closing events, once: the open block's stop, message_delta, message_stop."""
        if self.ended:
            return b""
        self.ended = True
        out: list[bytes] = []
        self._close(out)
        reason, sequence = stop_of(self.choice, self.stop_sequences, bool(self.tools), self.refused)
        usage = usage_of(self.usage)
        out.append(encode("message_delta", {"type": "message_delta",
                                            "delta": {"stop_reason": reason, "stop_sequence": sequence},
                                            "usage": usage}))
        out.append(encode("message_stop", {"type": "message_stop"}))
        return b"".join(out)

    def _tool(self, out: list[bytes], call: dict[str, Any]) -> None:
        at = call.get("index", 0)
        at = at if isinstance(at, int) else 0
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        if at not in self.tools:
            self.tools[at] = self._block(out, ("tool", at), {"type": "tool_use", "id": call.get("id") or tool_id(),
                                                            "name": function.get("name") or "", "input": {}})
        args = function.get("arguments")
        if isinstance(args, str) and args:
            # A late piece of an earlier call (servers stream calls one after another) goes to its own index.
            out.append(self._delta(self.tools[at], {"type": "input_json_delta", "partial_json": args}))

    def _block(self, out: list[bytes], kind: tuple[str, int], start: dict[str, Any]) -> int:
        """The index of the block ``kind``: the open one, or a new one (the open one closed first)."""
        if self.open == kind:
            return self.blocks - 1
        self._close(out)
        index = self.blocks
        self.blocks += 1
        self.open = kind
        out.append(encode("content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": start}))
        return index

    def _close(self, out: list[bytes]) -> None:
        if self.open is not None:
            out.append(encode("content_block_stop", {"type": "content_block_stop", "index": self.blocks - 1}))
            self.open = None

    @staticmethod
    def _delta(index: int, delta: dict[str, Any]) -> bytes:
        return encode("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


# --- the sink ----------------------------------------------------------------------------

def answer_headers(headers: list[tuple[bytes, bytes]], content_type: bytes,
                   request_id: str) -> list[tuple[bytes, bytes]]:
    """``headers`` with our content type, and ``request-id`` unless the backend sent its own."""
    out = [(k, v) for k, v in headers if k.lower() not in (b"content-type", b"content-length")]
    if not any(k.lower() == b"request-id" for k, _ in out):
        out.append((b"request-id", request_id.encode()))
    return [(b"content-type", content_type), *out]


async def respond_error(send: Send, err: GatewayError, request_id: str) -> None:
    """``err`` as a whole Anthropic error answer, with its own status and headers."""
    body = utf8(anthropic_envelope(err, request_id))   # never fails, even on a client's lone surrogate
    await respond(send, err.status, body, answer_headers(err.headers(), JSON_TYPE, request_id))


class AnthropicSink:
    __slots__ = ("_send", "_inner", "_request_id", "_headers", "_body", "_stream", "_decoder", "_model",
                 "_message_id", "_stops", "_show", "_cut", "streaming", "started", "finished", "status")

    def __init__(self, send: Send, streaming: bool, *, model: str, request_id: str,
                 stop_sequences: tuple[str, ...] = (), show_thinking: bool = True) -> None:
        self._send = send
        self._inner = AsgiSink(send, streaming)
        self._request_id = request_id
        self._model = model
        self._message_id = "msg_" + request_id.removeprefix("req_")
        self._stops = stop_sequences
        self._show = show_thinking
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._stream = StreamTranslator(self._message_id, model, stop_sequences, show_thinking) if streaming else None
        self._decoder = SSEDecoder() if streaming else None
        self._cut = False            # ended early with an error event; the rest is not sent
        self.streaming = streaming
        self.started = False
        self.finished = False
        self.status = 0

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.started = True
        self.status = status
        if self._stream is None:
            self._headers = headers   # goes out with the translated body at finish
            return
        await self._inner.start(status, answer_headers(headers, SSE_TYPE, self._request_id))
        await self._inner.send(self._stream.begin())

    async def send(self, chunk: bytes) -> None:
        if self._stream is None:
            self._body.append(chunk)
            return
        if self._cut:
            return
        assert self._decoder is not None
        out: list[bytes] = []
        for event in self._decoder.feed(chunk):
            if not event.has_data:
                out.append(PING)   # a keep-alive comment
            elif event.is_done:
                out.append(self._stream.end())
            else:
                try:
                    obj: Any = json.loads(event.data)
                except ValueError:
                    continue   # the relay forwards only events it parsed; nothing to lose here
                if isinstance(obj, dict) and "route_change" in obj:
                    out.append(self._error_event(UpstreamProtocolError(
                        "The answer broke off and its continuation on another backend diverged from what was "
                        "already sent; a Messages stream cannot take text back, so it ends here. Retry the call.",
                        code="stream_diverged")))
                    self._cut = True
                    break
                out.append(self._stream.feed(obj))
        data = b"".join(out)
        if data:
            await self._inner.send(data)

    async def finish(self) -> None:
        if self.finished:
            return
        if self._stream is None:
            await self._finish_buffered()
            return
        if not self._cut and not self._stream.ended:
            await self._inner.send(self._stream.end())   # whole by the relay's judgement, without [DONE]
        self.finished = True
        await self._inner.finish()

    async def _finish_buffered(self) -> None:
        raw = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body = []
        try:
            message = message_from_chat(json.loads(raw), message_id=self._message_id, model=self._model,
                                        stop_sequences=self._stops, show_thinking=self._show)
        except (ValueError, UpstreamProtocolError) as exc:
            err = exc if isinstance(exc, UpstreamProtocolError) else UpstreamProtocolError(
                "The backend's answer is not JSON")
            await self.fail(err)
            return
        self.finished = True
        await self._inner.start(self.status, answer_headers(self._headers, JSON_TYPE, self._request_id))
        await self._inner.send(utf8(message))
        await self._inner.finish()

    async def fail(self, error: GatewayError) -> None:
        if self.finished:
            return
        self.finished = True
        if self._stream is None or not self._inner.started:
            self.status = error.status
            await respond_error(self._send, error, self._request_id)
            return
        if not self._cut:
            await self._inner.send(self._error_event(error))
        await self._inner.finish()

    @staticmethod
    def _error_event(error: GatewayError) -> bytes:
        envelope = anthropic_envelope(error)
        return encode("error", envelope)
