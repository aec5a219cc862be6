"""The ``mcp`` entries of a call's ``tools``: the configured MCP servers whose tools the gateway runs for
the model on a chat or Responses call (``toolbox.py``; docs/mcp.md). Pure: no I/O.

An entry is OpenAI's Responses MCP tool: ``{"type": "mcp", "server_label":
<a name of mcp_servers>, "allowed_tools": [...] | {"tool_names": [...],
"read_only": true}, "require_approval": "never"}``, the same on either
API. The gateway runs every such entry itself and never dials a URL a
client gives: ``server_url`` may only repeat the configured server's
``url``, and client ``headers``, ``connector_id``, approval flows and
streams are refused, each with a 400 naming its field.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from attrs import frozen

from switchyard.actors.errors import InvalidRequest, UnsupportedRequestParameter
from switchyard.config.mcp_servers import McpServer

TYPE = "mcp"
NEVER = "never"
_FIELDS = ("type", "server_label", "server_url", "allowed_tools", "require_approval", "server_description")


@frozen
class McpUse:
    """One entry, read: its server, the tools it narrows to (names on the server; None: all), read-only."""

    server: str
    tools: frozenset[str] | None = None
    read_only: bool = False
    description: str | None = None

    def admits(self, tool: Mapping[str, Any]) -> bool:
        """Whether a tool of the server's listing (its name on the server) is one this entry offers."""
        if self.tools is not None and tool.get("name") not in self.tools:
            return False
        hints = tool.get("annotations")
        return not self.read_only or isinstance(hints, Mapping) and hints.get("readOnlyHint") is True


def named(payload: Mapping[str, Any]) -> bool:
    """Whether the body names any ``mcp`` tool (cheap: most calls name none)."""
    tools = payload.get("tools")
    return isinstance(tools, list) and any(isinstance(t, dict) and t.get("type") == TYPE for t in tools)


def uses(payload: Mapping[str, Any], servers: Sequence[McpServer], stream: bool) -> tuple[McpUse, ...]:
    """The body's ``mcp`` entries, read; the 400 naming the first field the gateway cannot serve."""
    if not named(payload):
        return ()
    by_name = {s.name: s for s in servers}
    out: list[McpUse] = []
    for i, tool in enumerate(payload["tools"]):
        if isinstance(tool, dict) and tool.get("type") == TYPE:
            use = _use(tool, f"tools[{i}]", by_name)
            if any(u.server == use.server for u in out):
                raise _invalid(f"'tools[{i}].server_label': MCP server {use.server!r} is named twice; name it once "
                               f"(its allowed_tools list every tool wanted)", f"tools[{i}].server_label")
            out.append(use)
    if stream:
        raise InvalidRequest("'stream': a call naming an MCP tool (type 'mcp') is served by the gateway's tool loop, "
                             "which answers whole; send it without stream", param="stream", code="invalid_value")
    choice = payload.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == TYPE:
        raise UnsupportedRequestParameter("'tool_choice' of type 'mcp' is not supported: the gateway offers an MCP "
                                          "server's tools as function tools; use 'auto' or 'required'",
                                          param="tool_choice")
    return tuple(out)


def _use(tool: Mapping[str, Any], path: str, servers: Mapping[str, McpServer]) -> McpUse:
    for key in tool:
        if key not in _FIELDS:
            why = {"headers": "the gateway calls a configured server with its configured credentials (its "
                              "headers, and the request headers it forwards)",
                   "connector_id": "the gateway runs only the MCP servers it is configured with"}.get(key)
            raise UnsupportedRequestParameter(
                f"'{path}.{key}' is not supported on an MCP tool the gateway runs" + (f": {why}" if why else ""),
                param=f"{path}.{key}")
    label = tool.get("server_label")
    if not isinstance(label, str) or not label:
        raise _invalid(f"'{path}.server_label' is required: the name of one of the gateway's MCP servers",
                       f"{path}.server_label", "missing_required_parameter")
    server = servers.get(label)
    if server is None:
        raise _invalid(f"'{path}.server_label': {label!r} is no MCP server of this gateway's (GET /mcp's "
                       f"tools/list shows the tools a key may use, as <server>__<tool>)", f"{path}.server_label")
    url = tool.get("server_url")
    if url is not None and url != server.url:
        raise _invalid(f"'{path}.server_url': the gateway runs MCP tools only on its configured servers and never "
                       f"dials a URL a request gives; leave server_url out and name the server by server_label",
                       f"{path}.server_url")
    approval = tool.get("require_approval")
    if approval is not None and approval != NEVER:
        raise UnsupportedRequestParameter(
            f"'{path}.require_approval': only 'never' is supported: the gateway runs the tools a key's "
            f"allowlists allow without asking (narrow them with allowed_tools)", param=f"{path}.require_approval")
    description = tool.get("server_description")
    if description is not None and not isinstance(description, str):
        raise _invalid(f"'{path}.server_description' must be a string", f"{path}.server_description",
                       "invalid_type")
    names, read_only = _allowed(tool.get("allowed_tools"), f"{path}.allowed_tools")
    return McpUse(label, names, read_only, description)


def _allowed(value: Any, path: str) -> tuple[frozenset[str] | None, bool]:
    """``allowed_tools``: a list of tool names, or a filter ``{"tool_names": [...], "read_only": bool}``."""
    if value is None:
        return None, False
    if isinstance(value, dict):
        for key in value:
            if key not in ("tool_names", "read_only"):
                raise _invalid(f"'{path}.{key}' is not a field of an allowed_tools filter (tool_names, read_only)",
                               f"{path}.{key}", "unknown_parameter")
        read_only = value.get("read_only", False)
        if not isinstance(read_only, bool):
            raise _invalid(f"'{path}.read_only' must be a boolean", f"{path}.read_only", "invalid_type")
        names, _ = _allowed(value.get("tool_names"), f"{path}.tool_names")
        return names, read_only
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise _invalid(f"'{path}' must be an array of tool names (or a filter object)", path, "invalid_type")
    return frozenset(value), False


def _invalid(message: str, param: str, code: str = "invalid_value") -> InvalidRequest:
    return InvalidRequest(message, param=param, code=code)
