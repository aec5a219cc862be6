"""The tool loop's rounds in Chat Completions shapes (``loop.py``'s ``Dialect``). Pure: no I/O.

Each round's body is the client's, with the conversation so far (the
model's tool calls and the gateway's ``tool`` results) appended to its
``messages``, the gateway's tools beside the client's own function tools,
and the ``mcp`` entries the gateway serves taken out of ``tools``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

from switchyard.actors.toolloop.loop import Function, ToolCall

GATEWAY_TYPES = ("mcp",)   # tools entries the gateway serves itself: never sent to a backend
_NO_TOOLS = ("tools", "tool_choice", "parallel_tool_calls")


class Chat:
    def client_tools(self, payload: Mapping[str, Any]) -> list[tuple[str, str]]:
        tools = payload.get("tools")
        out = []
        for i, tool in enumerate(tools if isinstance(tools, list) else ()):
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                out.append((f"tools[{i}].function.name", function["name"]))
        return out

    def round_body(self, payload: dict[str, Any], added: list[dict[str, Any]],
                   offered: Sequence[Function]) -> dict[str, Any]:
        body = dict(payload)
        if added:
            body["messages"] = [*payload.get("messages", ()), *added]
        return with_tools(body, [{"type": "function", "function": {
            "name": f.name, "description": f.description, "parameters": dict(f.parameters)}} for f in offered])

    def calls(self, answer: Any) -> list[ToolCall] | None:
        message = message_of(answer)
        if message is None:
            return None
        out = []
        for entry in message.get("tool_calls") or ():
            function = entry.get("function") if isinstance(entry, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                continue
            arguments = function.get("arguments")
            out.append(ToolCall(str(entry.get("id") or ""), function["name"],
                                arguments if isinstance(arguments, str) else json.dumps(arguments)))
        return out

    def exchange(self, answer: dict[str, Any], results: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
        message = message_of(answer) or {}
        turn = {"role": "assistant", "content": message.get("content"),
                "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                                           "arguments": c.arguments}}
                               for c, _ in results]}
        return [turn, *({"role": "tool", "tool_call_id": c.id, "content": text} for c, text in results)]

    def without(self, answer: dict[str, Any], owned: Callable[[str], bool]) -> dict[str, Any]:
        choices = []
        for choice in answer.get("choices") or ():
            message = choice.get("message") if isinstance(choice, dict) else None
            calls = message.get("tool_calls") if isinstance(message, dict) else None
            if isinstance(message, dict) and isinstance(calls, list):
                kept = [c for c in calls if not (isinstance(c, dict) and owned(str((c.get("function") or {})
                                                                                   .get("name"))))]
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


def with_tools(body: dict[str, Any], offered: list[dict[str, Any]]) -> dict[str, Any]:
    """``body`` with the client's own tools (the gateway's ``mcp`` entries taken out) and ``offered`` after
    them; with none at all, no ``tools`` and none of the fields an API refuses without them."""
    given = body.get("tools")
    own = [t for t in given if not (isinstance(t, dict) and t.get("type") in GATEWAY_TYPES)] \
        if isinstance(given, list) else []
    tools = [*own, *offered]
    if tools:
        body["tools"] = tools
    else:
        for key in _NO_TOOLS:
            body.pop(key, None)
    return body


def message_of(answer: Any) -> dict[str, Any] | None:
    """The first choice's message of a chat completion, or None."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    return message if isinstance(message, dict) else None
