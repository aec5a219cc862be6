"""The Responses API bridge, answer side: a Responses answer as a strict chat answer.

A buffered Response object becomes one ``chat.completion``; a Responses
event stream becomes ``chat.completion.chunk`` events. Reasoning items and
reasoning summary/text deltas become ``reasoning_content``; a refusal
becomes ``refusal`` with ``finish_reason: content_filter``; an incomplete
response becomes ``length`` (or ``content_filter`` when that is why it
stopped); function calls become ``tool_calls``. A failed or cancelled
response becomes an error object (``{"error": {...}}``), which the relay
treats as the failed attempt it is: before the first byte it may fail over.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

from typing import Any

from switchyard.actors.responses_relay import TERMINAL_EVENTS

JSONObject = dict[str, Any]


def chat_usage(usage: Any) -> JSONObject | None:
    """Responses ``usage`` in the Chat Completions names."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    total = usage.get("total_tokens")
    out: JSONObject = {"prompt_tokens": prompt, "completion_tokens": completion,
                       "total_tokens": _count(total) if total is not None else prompt + completion}
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": _count(cached)}
    reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": _count(reasoning)}
    return out


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def error_object(response: Any, default_message: str = "The upstream response failed") -> JSONObject:
    """A failed or cancelled Response (or an ``error`` stream event) as an OpenAI error envelope."""
    source = response if isinstance(response, dict) else {}
    err = source.get("error")
    if not isinstance(err, dict):
        err = source
    if source.get("status") == "cancelled" and not isinstance(source.get("error"), dict):
        return {"error": {"message": "The upstream cancelled the response", "type": "server_error",
                          "param": None, "code": "response_cancelled"}}
    code = err.get("code") if isinstance(err.get("code"), str) else None
    kind = err.get("type") if isinstance(err.get("type"), str) and err.get("type") != "error" else None
    if kind is None:
        kind = "invalid_request_error" if code is not None and code.startswith("invalid") else "server_error"
    message = err.get("message") if isinstance(err.get("message"), str) and err.get("message") else default_message
    return {"error": {"message": message, "type": kind, "param": err.get("param"), "code": code}}


def finish_reason(response: JSONObject, tool_calls: bool, refusal: bool) -> str:
    """The chat finish_reason of a Response that ended with ``completed`` or ``incomplete``."""
    if response.get("status") == "incomplete":
        details = response.get("incomplete_details") or {}
        return "content_filter" if details.get("reason") == "content_filter" else "length"
    if refusal:
        return "content_filter"
    return "tool_calls" if tool_calls else "stop"


def response_to_chat(response: JSONObject) -> JSONObject:
    """A buffered Response object as a ``chat.completion`` (or an error envelope when it did not succeed)."""
    status = response.get("status")
    if status not in ("completed", "incomplete"):
        if status in ("failed", "cancelled"):
            return error_object(response)
        return {"error": {"message": f"The upstream answered a response with status {status!r}, not a finished "
                                     f"one", "type": "server_error", "param": None, "code": "upstream_protocol_error"}}
    texts: list[str] = []
    refusals: list[str] = []
    reasoning: list[str] = []
    annotations: list[JSONObject] = []
    calls: list[JSONObject] = []
    for item in response.get("output") or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "output_text":
                    annotations += _annotations(part.get("annotations"), sum(len(t) for t in texts))
                    texts.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    refusals.append(part.get("refusal") or "")
        elif kind == "reasoning":
            reasoning += _reasoning_texts(item)
        elif kind == "function_call":
            calls.append({"id": item.get("call_id") or item.get("id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}})
    message: JSONObject = {"role": "assistant", "content": "".join(texts) if texts else None,
                           "refusal": "".join(refusals) if refusals else None}
    if reasoning:
        message["reasoning_content"] = "\n\n".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    if annotations:
        message["annotations"] = annotations
    out: JSONObject = {"id": response.get("id"), "object": "chat.completion", "created": _created(response),
                       "model": response.get("model"),
                       "choices": [{"index": 0, "message": message, "logprobs": None,
                                    "finish_reason": finish_reason(response, bool(calls), bool(refusals))}]}
    usage = chat_usage(response.get("usage"))
    if usage is not None:
        out["usage"] = usage
    if response.get("service_tier") is not None:
        out["service_tier"] = response["service_tier"]
    return out


def _created(response: JSONObject) -> int:
    created = response.get("created_at")
    return int(created) if isinstance(created, (int, float)) and not isinstance(created, bool) else 0


def _reasoning_texts(item: JSONObject) -> list[str]:
    out = [s.get("text") or "" for s in item.get("summary") or () if isinstance(s, dict)]
    out += [c.get("text") or "" for c in item.get("content") or () if isinstance(c, dict)]
    return [t for t in out if t]


def _annotations(raw: Any, offset: int) -> list[JSONObject]:
    """URL citations in the chat shape (offsets into the joined content); other kinds have no chat form."""
    out = []
    for a in raw or ():
        if isinstance(a, dict) and a.get("type") == "url_citation":
            out.append({"type": "url_citation", "url_citation": {
                "start_index": _count(a.get("start_index")) + offset, "end_index": _count(a.get("end_index")) + offset,
                "url": a.get("url"), "title": a.get("title")}})
    return out




class StreamToChat:
    """Responses stream events in, chat chunks (or one error object) out; ``done`` once the answer ended.

    The first chunk (``role: assistant``) goes out with the first content, not
    at ``response.created``: until then the stream has said nothing, so the
    attempt may still fail over if the response fails.
    """

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage
        self.id: Any = None
        self.model: Any = None
        self.created = 0
        self.done = False
        self.failed = False     # it ended with an error object, not a finish_reason
        self._role_sent = False
        self._tools: dict[Any, int] = {}        # output_index -> tool_calls index
        self._argued: set[Any] = set()          # output indexes whose arguments came as deltas
        self._refused = False
        self._reasoning_part: tuple[Any, Any] | None = None   # (item, part) of the reasoning text being sent

    def feed(self, event: JSONObject) -> list[JSONObject]:
        kind = event.get("type")
        if kind in ("response.created", "response.in_progress", "response.queued") or kind in TERMINAL_EVENTS:
            self._note(event.get("response"))
        if kind == "response.output_text.delta":
            return self._delta({"content": event.get("delta") or ""})
        if kind == "response.refusal.delta":
            self._refused = True
            return self._delta({"refusal": event.get("delta") or ""})
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._reasoning(event)
        if kind == "response.output_item.added":
            return self._item_added(event)
        if kind == "response.function_call_arguments.delta":
            index = self._tools.get(event.get("output_index"))
            if index is None:
                return []
            self._argued.add(event.get("output_index"))
            return self._delta({"tool_calls": [{"index": index, "function": {"arguments": event.get("delta") or ""}}]})
        if kind == "response.output_item.done":
            return self._item_done(event)
        if kind == "error":
            self.done = self.failed = True
            return [error_object(event, "The upstream stream failed")]
        if kind in TERMINAL_EVENTS:
            return self._end(event.get("response") or {})
        return []   # lifecycle and hosted-tool events carry nothing a chat client sees

    def _note(self, response: Any) -> None:
        if isinstance(response, dict):
            self.id = response.get("id", self.id)
            self.model = response.get("model", self.model)
            self.created = _created(response) or self.created

    def _chunk(self, delta: JSONObject | None, finish: str | None = None) -> JSONObject:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": choices}

    def _delta(self, delta: JSONObject) -> list[JSONObject]:
        if not self._role_sent:
            self._role_sent = True
            delta = {"role": "assistant", **delta}
        return [self._chunk(delta)]

    def _reasoning(self, event: JSONObject) -> list[JSONObject]:
        text = event.get("delta") or ""
        part = (event.get("item_id"), event.get("summary_index", event.get("content_index")))
        if self._reasoning_part is not None and part != self._reasoning_part:
            text = "\n\n" + text   # a new summary part or reasoning item: as the buffered answer joins them
        self._reasoning_part = part
        return self._delta({"reasoning_content": text})

    def _item_added(self, event: JSONObject) -> list[JSONObject]:
        item = event.get("item")
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return []
        index = self._tools[event.get("output_index")] = len(self._tools)
        return self._delta({"tool_calls": [{"index": index, "id": item.get("call_id") or item.get("id"),
                                            "type": "function",
                                            "function": {"name": item.get("name"), "arguments": ""}}]})

    def _item_done(self, event: JSONObject) -> list[JSONObject]:
        """A function call whose arguments came whole (no deltas) gets them now."""
        item = event.get("item")
        at = event.get("output_index")
        if not isinstance(item, dict) or item.get("type") != "function_call" or at in self._argued:
            return []
        out = [] if at in self._tools else self._item_added(event)
        self._argued.add(at)
        if item.get("arguments"):
            out += self._delta({"tool_calls": [{"index": self._tools[at],
                                                "function": {"arguments": item["arguments"]}}]})
        return out

    def _end(self, response: JSONObject) -> list[JSONObject]:
        self.done = True
        if response.get("status") in ("failed", "cancelled"):
            self.failed = True
            return [error_object(response)]
        out = []
        if not self._role_sent:   # an answer with no content at all is still a well-formed chat stream
            out += self._delta({"content": ""})
        out.append(self._chunk({}, finish_reason(response, bool(self._tools), self._refused)))
        usage = chat_usage(response.get("usage"))
        if self.include_usage and usage is not None:
            out.append({**self._chunk(None), "usage": usage})
        return out
