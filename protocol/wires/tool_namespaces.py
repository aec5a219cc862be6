"""A Responses ``namespace`` tool on a chat backend: its function tools flattened under one name each.

A ``namespace`` tool (Codex CLI's ``multi_agent_v1``) groups function tools
under a name; a Responses ``function_call`` item says which namespace its
function belongs to. Chat has no groups, so the reverse bridge offers each
inner function as ``<namespace>__<name>`` and reads a chat tool call of that
name back as the function ``name`` in the ``namespace``. The bridge refuses
a request where a flattened name would collide with a plain function's.

Pure: no I/O, no clock, no trio.
"""

from __future__ import annotations

from typing import Any, Mapping

SEPARATOR = "__"   # letters, digits, '_' and '-' only: what every chat server takes in a function name


def chat_name(namespace: str, name: str) -> str:
    return f"{namespace}{SEPARATOR}{name}"


def names_of(request: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Chat function name -> (namespace, function name), for the namespace tools of a Responses request."""
    out: dict[str, tuple[str, str]] = {}
    tools = request.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict) or tool.get("type") != "namespace" or not isinstance(tool.get("name"), str):
            continue
        inner = tool.get("tools")
        for fn in inner if isinstance(inner, list) else ():
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                out[chat_name(tool["name"], fn["name"])] = (tool["name"], fn["name"])
    return out


def restore(item: dict[str, Any], names: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """A ``function_call`` item whose name is a flattened one, as the namespace's own (in place)."""
    name = item.get("name")
    found = names.get(name) if isinstance(name, str) else None
    if found is not None:
        item["namespace"], item["name"] = found
    return item
