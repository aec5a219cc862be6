"""A cached answer's one stored form, a ``chat.completion``, and the two ways it goes out again.

Whether the call that stored it streamed or not, the cache keeps the
buffered object: a stream is folded into it (``fold_stream``) once it has
ended cleanly, with every choice's text, reasoning (a native backend's
signed blocks included), refusal, tool calls and finish reason, and its
usage; a stream's own events are kept beside it. A buffered hit is that
object as JSON. A streaming hit (``stream_events``) is, for an answer
stored from a stream, its original events, one per original chunk, as
they were sent; for one stored from a buffered call, the answer
*re-chunked*: per choice one event for the role, one per reasoning block
part, one for the text, one per tool call, then the finish event. Either
way the usage event follows when the client asked for usage
(``stream_options.include_usage``; left out when it did not), then
``[DONE]``. Every event is a ``chat.completion.chunk`` with the original
id, created time, model and system fingerprint, so the SDKs (and the
Messages door's translation) read it as they read the original.

An answer that is not whole -- a buffered body without a finish reason, a
stream without ``[DONE]`` or a finish reason, an in-band error, a malformed
event, a ``route_change`` (the client was told to start over) -- has no
stored form: ``Unclean`` says why. Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
from typing import Any

from switchyard.actors.sse import SSEDecoder

DONE = b"data: [DONE]\n\n"
_TEXT_KEYS = ("content", "reasoning_content", "reasoning", "refusal")


class Unclean(Exception):
    """The recorded answer has no stored form; the message is the metric's reason."""


def clean_completion(body: bytes) -> dict[str, Any]:
    """A buffered 200 answer as stored: a chat.completion whose every choice has a finish reason."""
    try:
        payload = json.loads(body)
    except ValueError:
        raise Unclean("malformed") from None
    if not isinstance(payload, dict) or payload.get("error") is not None:
        raise Unclean("error")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Unclean("no_finish_reason")
    for choice in choices:
        if not isinstance(choice, dict) or not choice.get("finish_reason"):
            raise Unclean("no_finish_reason")
    return _without_cost(payload)


def fold_stream(data: bytes, usage: Any = None) -> tuple[dict[str, Any], list[str]]:
    """A recorded chat stream (the bytes the client got) as one chat.completion, and its events' data
    (a usage-only event left out: the replay adds usage as its client asks).

    ``usage`` is the backend's usage when the stream carried none to the
    client (the router asked for it and hid it).
    """
    decoder = SSEDecoder()
    events = decoder.feed(data)
    tail = decoder.close()
    if tail is not None and tail.has_data:
        events.append(tail)
    out: dict[str, Any] = {}
    choices: dict[int, _Choice] = {}
    kept: list[str] = []
    done = False
    for event in events:
        if not event.has_data:
            continue   # keep-alive comments
        if done:
            raise Unclean("malformed")
        if event.is_done:
            done = True
            continue
        try:
            chunk = json.loads(event.data)
        except ValueError:
            raise Unclean("malformed") from None
        if not isinstance(chunk, dict) or chunk.get("error") is not None:
            raise Unclean("error")
        if "route_change" in chunk:
            raise Unclean("route_changed")
        for key in ("id", "created", "model", "system_fingerprint", "service_tier"):
            if chunk.get(key) is not None:
                out[key] = chunk[key]
        if isinstance(chunk.get("usage"), dict):
            usage = chunk["usage"]
            if not chunk.get("choices"):
                continue
            chunk = {k: v for k, v in chunk.items() if k != "usage"}
            kept.append(json.dumps(chunk, separators=(",", ":"), ensure_ascii=False))
        else:
            kept.append(event.data.decode())
        for c in chunk.get("choices") or ():
            if not isinstance(c, dict):
                raise Unclean("malformed")
            at = c.get("index", 0)
            choices.setdefault(at if isinstance(at, int) else 0, _Choice()).feed(c)
    if not done:
        raise Unclean("truncated")
    if not choices or any(c.finish_reason is None for c in choices.values()):
        raise Unclean("no_finish_reason")
    completion = {"id": out.get("id", ""), "object": "chat.completion", "created": out.get("created", 0),
                  "model": out.get("model", ""),
                  "choices": [choices[i].as_choice(i) for i in sorted(choices)]}
    for key in ("system_fingerprint", "service_tier"):
        if key in out:
            completion[key] = out[key]
    if isinstance(usage, dict):
        completion["usage"] = usage
    return _without_cost(completion), kept


class _Choice:
    """One choice's deltas, folded."""

    def __init__(self) -> None:
        self.role = "assistant"
        self.text: dict[str, list[str]] = {}
        self.blocks: list[dict[str, str]] = []       # a native backend's reasoning blocks, signed or redacted
        self.open_block: dict[str, str] | None = None
        self.signed = False
        self.tools: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.extra: dict[str, Any] = {}              # stop_reason (which stop string), logprobs

    def feed(self, c: dict[str, Any]) -> None:
        delta = c.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        if isinstance(delta.get("role"), str):
            self.role = delta["role"]
        for key in _TEXT_KEYS:
            piece = delta.get(key)
            if isinstance(piece, str) and piece:
                self.text.setdefault(key, []).append(piece)
                if key in ("reasoning_content", "reasoning"):
                    block = self._thinking()
                    block["thinking"] += piece
        signature = delta.get("reasoning_signature")
        if isinstance(signature, str) and signature:
            self.signed = True
            self._thinking()["signature"] += signature
        redacted = delta.get("reasoning_redacted")
        if isinstance(redacted, str):
            self.signed = True
            self.open_block = None
            self.blocks.append({"type": "redacted_thinking", "data": redacted})
        for call in delta.get("tool_calls") or ():
            if not isinstance(call, dict):
                raise Unclean("malformed")
            at = call.get("index", 0)
            tool = self.tools.setdefault(at if isinstance(at, int) else 0,
                                         {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                tool["id"] = call["id"]
            function = call.get("function")
            if not isinstance(function, dict):
                function = {}
            if isinstance(function.get("name"), str):
                tool["function"]["name"] += function["name"]
            if isinstance(function.get("arguments"), str):
                tool["function"]["arguments"] += function["arguments"]
        logprobs = c.get("logprobs")
        if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
            self.extra.setdefault("logprobs", {"content": []})["content"].extend(logprobs["content"])
        if c.get("finish_reason"):
            self.finish_reason = c["finish_reason"]
            if c.get("stop_reason") is not None:
                self.extra["stop_reason"] = c["stop_reason"]

    def _thinking(self) -> dict[str, str]:
        if self.open_block is None or self.open_block["signature"]:
            self.open_block = {"type": "thinking", "thinking": "", "signature": ""}
            self.blocks.append(self.open_block)
        return self.open_block

    def as_choice(self, index: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": self.role, "content": "".join(self.text.get("content", ())) or None}
        for key in _TEXT_KEYS[1:]:
            if key in self.text:
                message[key] = "".join(self.text[key])
        if self.signed:
            message["reasoning_blocks"] = self.blocks
        if self.tools:
            message["tool_calls"] = [self.tools[i] for i in sorted(self.tools)]
        return {"index": index, "message": message, "finish_reason": self.finish_reason, **self.extra}


def _without_cost(payload: dict[str, Any]) -> dict[str, Any]:
    """The gateway's price of the original call is not part of the answer (a hit costs nothing)."""
    usage = payload.get("usage")
    if isinstance(usage, dict) and "cost" in usage:
        payload["usage"] = {k: v for k, v in usage.items() if k != "cost"}
    return payload


def stream_events(completion: dict[str, Any], include_usage: bool, events: list[str] | None = None) -> list[bytes]:
    """The stored answer as a chat stream: its original ``events`` if it has them, else re-chunked (see the
    module's docstring)."""
    head = {"id": completion.get("id", ""), "object": "chat.completion.chunk",
            "created": completion.get("created", 0), "model": completion.get("model", "")}
    for key in ("system_fingerprint", "service_tier"):
        if key in completion:
            head[key] = completion[key]
    out: list[bytes] = []
    if events is not None:
        model = completion.get("model")
        for data in events:
            chunk = json.loads(data)
            if chunk.get("model") != model:   # a variant's hit names the client's model, as the original did
                data = json.dumps({**chunk, "model": model}, separators=(",", ":"), ensure_ascii=False)
            out.append(b"data: " + data.encode() + b"\n\n")
        return _ending(out, head, completion, include_usage)

    def emit(index: int, delta: dict[str, Any], **choice: Any) -> None:
        out.append(_event({**head, "choices": [{"index": index, "delta": delta, "logprobs": None,
                                                 "finish_reason": None, **choice}]}))

    for choice in completion.get("choices") or ():
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        emit(index, {"role": message.get("role", "assistant"), "content": ""})
        blocks = message.get("reasoning_blocks")
        if isinstance(blocks, list):
            for block in blocks:
                if block.get("type") == "redacted_thinking":
                    emit(index, {"reasoning_redacted": block.get("data", "")})
                    continue
                if block.get("thinking"):
                    emit(index, {"reasoning_content": block["thinking"]})
                if block.get("signature"):
                    emit(index, {"reasoning_signature": block["signature"]})
        else:
            for key in ("reasoning_content", "reasoning"):
                if message.get(key):
                    emit(index, {key: message[key]})
        for key in ("content", "refusal"):
            if isinstance(message.get(key), str) and message[key]:
                emit(index, {key: message[key]})
        for at, call in enumerate(message.get("tool_calls") or ()):
            emit(index, {"tool_calls": [{"index": at, **call}]})
        last = {"finish_reason": choice.get("finish_reason")}
        if "stop_reason" in choice:
            last["stop_reason"] = choice["stop_reason"]
        if isinstance(choice.get("logprobs"), dict):
            last["logprobs"] = choice["logprobs"]
        emit(index, {}, **last)
    return _ending(out, head, completion, include_usage)


def _ending(out: list[bytes], head: dict[str, Any], completion: dict[str, Any], include_usage: bool) -> list[bytes]:
    """The usage event when the client asked for it, then ``[DONE]``."""
    if include_usage and isinstance(completion.get("usage"), dict):
        out.append(_event({**head, "choices": [], "usage": completion["usage"]}))
    out.append(DONE)
    return out


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def with_model(completion: dict[str, Any], model: str | None) -> dict[str, Any]:
    """The stored answer naming ``model`` (the client's own name: a variant's shares its base's entry)."""
    if model is None or completion.get("model") == model:
        return completion
    return {**completion, "model": model}
