"""The tool loop's rounds in Responses API shapes (``loop.py``'s ``Dialect``). Pure: no I/O.

Each round's body is the client's, with the conversation so far appended to
its ``input`` (a string input becomes its one user message first): the
round's output items as they came (reasoning, message, ``function_call``),
then one ``function_call_output`` per call. The gateway's tools are offered
as function tools (``strict: false``: a tool server's input schema is not
written for strict mode) beside the client's own, and the ``mcp`` entries
the gateway serves are taken out of ``tools``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

from switchyard.actors.toolloop.chat import with_tools
from switchyard.actors.toolloop.loop import Function, ToolCall

CALL = "function_call"
_CARRIED = ("reasoning", "message", CALL)   # a round's output items carried into the next round's input


class Responses:
    def client_tools(self, payload: Mapping[str, Any]) -> list[tuple[str, str]]:
        tools = payload.get("tools")
        return [(f"tools[{i}].name", tool["name"]) for i, tool in enumerate(tools if isinstance(tools, list) else ())
                if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("name"), str)]

    def round_body(self, payload: dict[str, Any], added: list[dict[str, Any]],
                   offered: Sequence[Function]) -> dict[str, Any]:
        body = dict(payload)
        if added:
            given = payload.get("input")
            items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or ())
            body["input"] = [*items, *added]
        return with_tools(body, [{"type": "function", "name": f.name, "description": f.description,
                                  "parameters": dict(f.parameters), "strict": False} for f in offered])

    def calls(self, answer: Any) -> list[ToolCall] | None:
        output = answer.get("output") if isinstance(answer, dict) else None
        if not isinstance(output, list):
            return None
        return [ToolCall(str(item.get("call_id") or ""), item["name"], _text(item.get("arguments")))
                for item in output if isinstance(item, dict) and item.get("type") == CALL
                and isinstance(item.get("name"), str)]

    def exchange(self, answer: dict[str, Any], results: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
        carried = [item for item in answer.get("output") or () if isinstance(item, dict)
                   and item.get("type") in _CARRIED]
        return [*carried, *({"type": "function_call_output", "call_id": c.id, "output": text} for c, text in results)]

    def without(self, answer: dict[str, Any], owned: Callable[[str], bool]) -> dict[str, Any]:
        output = answer.get("output")
        if not isinstance(output, list):
            return answer
        return {**answer, "output": [item for item in output if not (
            isinstance(item, dict) and item.get("type") == CALL and owned(str(item.get("name"))))]}


def _text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
