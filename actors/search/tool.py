"""The ``web_search`` function tool the gateway offers on ``:online``, and what a call of it asks. Pure."""

from __future__ import annotations

import json

from switchyard.actors.toolloop.loop import Function, ToolCall

NAME = "web_search"
DEFINITION = Function(
    NAME, ("Search the web for current information. Returns numbered sources (title, url, snippet); "
           "cite a source you use by its number in square brackets, like [1]."),
    {"type": "object", "properties": {"query": {"type": "string", "description": "What to search for"}},
     "required": ["query"]})


def query_of(call: ToolCall) -> str | None:
    """The ``query`` a ``web_search`` call asks for, or None when its arguments carry none."""
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return None
    query = arguments.get("query") if isinstance(arguments, dict) else None
    return query.strip() if isinstance(query, str) and query.strip() else None
