"""Which function tool a simulated chat answer calls, and with what arguments (``Simulation.call_tools``).

The tool is ``tool_choice``'s, else the first offered; none when the request
offers none or forbids calls. Without ``tool_arguments`` the call's
arguments fill each required string parameter of the tool's schema with the
last user message's text (a search tool is asked for what the user asked),
or are the fixed ``get_weather`` arguments for a tool without one. An
answer to tool output that lists numbered sources (``[n] title`` lines, as
``:online``'s web search feeds back) cites each of them as ``[n]``, as the
tool asks a model to.
"""

from __future__ import annotations

import json
import re
from typing import Any

from switchyard.protocol.simulated.parts import TOOL_ARGUMENTS

_SOURCE = re.compile(r"^\[(\d{1,4})\] ", re.MULTILINE)


def offered(body: dict[str, Any]) -> dict[str, Any] | None:
    """The ``function`` object of the tool a chat request offers to call, or None."""
    tools: list[dict[str, Any]] = [
        t["function"] for t in body.get("tools") or () if isinstance(t, dict) and t.get("type") == "function"
        and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)]
    choice = body.get("tool_choice")
    if not tools or choice == "none":
        return None
    named = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
    return next((t for t in tools if t["name"] == named), tools[0])


def ends_with_tool_output(body: dict[str, Any]) -> bool:
    messages = body.get("messages")
    return isinstance(messages, list) and bool(messages) and isinstance(messages[-1], dict) \
        and messages[-1].get("role") == "tool"


def cite(tokens: list[str], body: dict[str, Any]) -> list[str]:
    """``tokens`` with the last one citing each numbered source of the trailing tool outputs, if any."""
    numbers: list[str] = []
    for message in reversed(body.get("messages") or ()):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        content = message.get("content")
        numbers[:0] = [n for n in _SOURCE.findall(content) if n not in numbers] if isinstance(content, str) else []
    if not numbers or not tokens:
        return tokens
    return [*tokens[:-1], tokens[-1] + " " + "".join(f"[{n}]" for n in numbers)]


def arguments_for(function: dict[str, Any], body: dict[str, Any]) -> str:
    schema = function.get("parameters")
    required = schema.get("required") if isinstance(schema, dict) else None
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(required, list) or not isinstance(properties, dict):
        return TOOL_ARGUMENTS
    asked = _last_user_text(body)
    return json.dumps({name: asked for name in required
                       if isinstance(properties.get(name), dict) and properties[name].get("type") == "string"})


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or ()):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""
