"""The ``web_search`` function tool the gateway offers on ``:online``, and the bodies of the loop's rounds.

Each round's body is the client's, with the conversation so far (the
model's tool calls and the gateway's results) appended to its messages, and
the client's own tools kept beside ``web_search``; the last round is offered
no ``web_search``, so it has to answer. A client tool of the same name would
be ambiguous: the call is refused (``clash``). Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from attrs import frozen

NAME = "web_search"
DEFINITION: dict[str, Any] = {"type": "function", "function": {
    "name": NAME,
    "description": ("Search the web for current information. Returns numbered sources (title, url, snippet); "
                    "cite a source you use by its number in square brackets, like [1]."),
    "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "What to search for"}},
                   "required": ["query"]}}}
_NO_TOOLS = ("tools", "tool_choice", "parallel_tool_calls")


@frozen
class ToolCall:
    id: str
    name: str
    arguments: str


def clash(payload: dict[str, Any]) -> str | None:
    """The field path of a client tool named like the gateway's, or None."""
    tools = payload.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == NAME:
            return f"tools[{i}].function.name"
    return None


def round_body(payload: dict[str, Any], added: list[dict[str, Any]], offer: bool) -> dict[str, Any]:
    """The body of one model round: the client's ``payload`` with the messages ``added`` so far, and
    ``web_search`` offered beside the client's tools when ``offer``."""
    body = dict(payload)
    if added:
        body["messages"] = [*payload.get("messages", ()), *added]
    own = [t for t in payload.get("tools") or () if isinstance(payload.get("tools"), list)]
    tools = [*own, DEFINITION] if offer else own
    if tools:
        body["tools"] = tools
    else:   # a chat API refuses a tool_choice without tools
        for key in _NO_TOOLS:
            body.pop(key, None)
    return body


def message_of(answer: Any) -> dict[str, Any] | None:
    """The first choice's message of a chat completion, or None."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    return message if isinstance(message, dict) else None


def tool_calls(message: dict[str, Any]) -> list[ToolCall]:
    """The function calls ``message`` makes, in order (malformed entries are left out)."""
    out = []
    for entry in message.get("tool_calls") or ():
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        out.append(ToolCall(str(entry.get("id") or ""), function["name"],
                            arguments if isinstance(arguments, str) else json.dumps(arguments)))
    return out


def query_of(call: ToolCall) -> str | None:
    """The ``query`` a ``web_search`` call asks for, or None when its arguments carry none."""
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return None
    query = arguments.get("query") if isinstance(arguments, dict) else None
    return query.strip() if isinstance(query, str) and query.strip() else None


def searches_only(calls: list[ToolCall]) -> bool:
    """Whether every call is the gateway's: the loop runs them. One client tool among them and the answer
    goes back to the client, which runs its own tools."""
    return bool(calls) and all(c.name == NAME for c in calls)


def without_searches(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` with the gateway's ``web_search`` calls taken out of every choice: the client never offered
    that tool and has no result to give back for it."""
    choices = []
    for choice in answer.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(message, dict) and isinstance(calls, list):
            kept = [c for c in calls if not (isinstance(c, dict) and (c.get("function") or {}).get("name") == NAME)]
            if len(kept) != len(calls):
                message = dict(message)
                if kept:
                    message["tool_calls"] = kept
                else:
                    message.pop("tool_calls", None)
                choice = {**choice, "message": message}
                if not kept and choice.get("finish_reason") == "tool_calls":
                    choice["finish_reason"] = "stop"
        choices.append(choice)
    return {**answer, "choices": choices}


def exchange(message: dict[str, Any], results: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
    """The messages a round adds: the model's turn with its calls, then one ``tool`` message per call."""
    turn = {"role": "assistant", "content": message.get("content"),
            "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                           for c, _ in results]}
    return [turn, *({"role": "tool", "tool_call_id": c.id, "content": text} for c, text in results)]
