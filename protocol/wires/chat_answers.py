"""The reverse Responses bridge, answer side: a chat answer as a Response object.

A chat backend's ``chat.completion`` becomes one Response (``object:
response``) in the shapes the ``openai`` SDK parses: the reasoning
(``reasoning_content`` or ``reasoning``) as a ``reasoning`` item with its
text as ``reasoning_text`` content, the content and refusal as one assistant
``message`` item, each tool call as a ``function_call`` item. The finish
reason gives the status (``length``: ``incomplete`` for
``max_output_tokens``; ``content_filter``: ``incomplete`` for
``content_filter``), the chat usage the Responses usage. The request's own
settings are echoed (``instructions``, ``tools``, ``temperature``, ...), as
the Responses API does. An answer that is no chat completion becomes an
error object, which the relay takes for the failed attempt it is.

Ids are new (``resp_``, ``msg_``, ``fc_``, ``rs_``): a chat backend keeps
nothing, so such a response cannot be retrieved later.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

import secrets
from typing import Any, Mapping

from switchyard.actors.response_echo import response_fields
from switchyard.protocol.wires.tool_namespaces import names_of, restore

JSONObject = dict[str, Any]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


def count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def responses_usage(usage: Any) -> JSONObject | None:
    """Chat ``usage`` in the Responses names (``responses_answers.chat_usage`` the other way)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    total = usage.get("total_tokens")
    details = usage.get("prompt_tokens_details") or {}
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    # cache_write_tokens is required by the Responses usage; chat usage rarely reports it (then 0)
    cache = {"cached_tokens": count(details.get("cached_tokens")),
             "cache_write_tokens": count(details.get("cache_write_tokens"))}
    out: JSONObject = {"input_tokens": prompt, "input_tokens_details": cache,
                       "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": count(reasoning)},
                       "total_tokens": count(total) if total is not None else prompt + completion}
    cost = usage.get("cost")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        out["cost"] = cost
    return out


def status_of(finish_reason: Any, refused: bool) -> tuple[str, JSONObject | None]:
    """(status, incomplete_details) for a chat finish_reason (``responses_answers.finish_reason`` reversed)."""
    if finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if finish_reason == "content_filter" and not refused:
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def reasoning_of(message: Mapping[str, Any]) -> str | None:
    """The model's reasoning as chat servers send it (``reasoning_content``; newer ones ``reasoning``)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def echo(request: Mapping[str, Any]) -> JSONObject:
    """The request's settings as a Response repeats them; ``store`` is false, as nothing is stored, and
    ``completed_at`` null: a chat answer does not say when it ended."""
    return {**response_fields(request), "store": False, "previous_response_id": None, "completed_at": None}


def response_object(rid: str, request: Mapping[str, Any], model: Any, created: Any, status: str,
                    output: list[JSONObject], usage: JSONObject | None = None,
                    incomplete: JSONObject | None = None, error: JSONObject | None = None) -> JSONObject:
    out: JSONObject = {"id": rid, "object": "response",
                       "created_at": created if isinstance(created, (int, float)) and not isinstance(created, bool)
                       else 0, "status": status, "error": error, "incomplete_details": incomplete,
                       "model": model, "output": output, **echo(request), "usage": usage}
    return out


def text_part(text: str) -> JSONObject:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_item(iid: str, text: str, status: str) -> JSONObject:
    return {"type": "reasoning", "id": iid, "summary": [], "content": [{"type": "reasoning_text", "text": text}],
            "status": status}


def message_item(iid: str, parts: list[JSONObject], status: str) -> JSONObject:
    return {"type": "message", "id": iid, "role": "assistant", "status": status, "content": parts}


def call_item(iid: str, call_id: Any, name: Any, arguments: str, status: str) -> JSONObject:
    return {"type": "function_call", "id": iid, "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}


def protocol_error(message: str) -> JSONObject:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": "upstream_protocol_error"}}


def chat_to_response(answer: Any, request: Mapping[str, Any]) -> JSONObject:
    """A buffered ``chat.completion`` as a Response object; an error envelope passes; anything else is one."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        return answer
    choices = answer.get("choices") if isinstance(answer, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    message = choice.get("message") if choice is not None else None
    if choice is None or not isinstance(message, dict):
        return protocol_error("The chat backend answered without a message in choices[0]")
    refusal = message.get("refusal") if isinstance(message.get("refusal"), str) and message.get("refusal") else None
    status, incomplete = status_of(choice.get("finish_reason"), refusal is not None)
    item_status = "incomplete" if status == "incomplete" else "completed"
    output: list[JSONObject] = []
    reasoning = reasoning_of(message)
    if reasoning is not None:
        output.append(reasoning_item(new_id("rs"), reasoning, item_status))
    parts: list[JSONObject] = []
    content = message.get("content")
    if isinstance(content, list):   # some servers answer in parts
        content = "".join(p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text")
    if isinstance(content, str) and content:
        parts.append(text_part(content))
    if refusal is not None:
        parts.append({"type": "refusal", "refusal": refusal})
    if parts:
        output.append(message_item(new_id("msg"), parts, item_status))
    names = names_of(request)   # a namespace's functions, offered flattened
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            return protocol_error("The chat backend answered a tool call without a function")
        output.append(restore(call_item(new_id("fc"), call.get("id") or new_id("call"), fn.get("name"),
                                        fn.get("arguments") or "", "completed"), names))
    return response_object(new_id("resp"), request, answer.get("model"), answer.get("created"), status, output,
                           responses_usage(answer.get("usage")), incomplete)
